package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/probed/probed/kube/internal/kubelet"
)

// runtime stands in for the scheduler and the container runtime: it
// binds every pending pod to the demo's node, gives it the next pod IP
// and serves HTTP on its container ports there (200, or 503 while
// failing), then has the kubelet stand-in report it running; a deleted
// pod's servers stop and its deletion is completed, as kubelet does.
type runtime struct {
	cs    kubernetes.Interface
	kl    *kubelet.Kubelet
	out   io.Writer
	queue workqueue.TypedRateLimitingInterface[string]
	pods  cache.Indexer
	wg    sync.WaitGroup
	halt  context.CancelFunc

	mu      sync.Mutex
	running map[string]*podServer // by namespace/name; guarded by mu
	nextIP  int                   // guarded by mu
}

// podServer serves one pod's container ports at its IP.
type podServer struct {
	name, ip string
	failing  atomic.Bool
	servers  []*http.Server
	wg       sync.WaitGroup
}

func startRuntime(ctx context.Context, cs kubernetes.Interface, kl *kubelet.Kubelet, out io.Writer) (*runtime, error) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	rt := &runtime{
		cs: cs, kl: kl, out: out, pods: inf.GetIndexer(), halt: cancel,
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		running: map[string]*podServer{}, nextIP: 256, // 10.244.1.0 on: the pods
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			rt.queue.Add(key)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(runCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		factory.Shutdown()
		return nil, ctx.Err()
	}
	rt.wg.Go(func() {
		for rt.next(runCtx) {
		}
	})
	rt.wg.Go(func() {
		<-runCtx.Done()
		rt.queue.ShutDown()
		factory.Shutdown()
	})
	return rt, nil
}

// stop stops the pods' servers and the runtime's goroutines, and waits
// for them.
func (rt *runtime) stop() {
	rt.halt()
	rt.wg.Wait()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for key, s := range rt.running {
		s.close()
		delete(rt.running, key)
	}
}

func (rt *runtime) next(ctx context.Context) bool {
	key, shutdown := rt.queue.Get()
	if shutdown {
		return false
	}
	defer rt.queue.Done(key)
	if err := rt.sync(ctx, key); err != nil && ctx.Err() == nil {
		logf(rt.out, "pod %s: %v (retrying)", key, err)
		rt.queue.AddRateLimited(key)
		return true
	}
	rt.queue.Forget(key)
	return true
}

// sync makes the pod key run, or stop.
func (rt *runtime) sync(ctx context.Context, key string) error {
	obj, exists, err := rt.pods.GetByKey(key)
	if err != nil {
		return err
	}
	if !exists {
		rt.remove(key)
		return nil
	}
	pod := obj.(*corev1.Pod)
	switch {
	case pod.DeletionTimestamp != nil:
		rt.remove(key)
		err := rt.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	case pod.Spec.NodeName == "":
		return rt.cs.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: rt.kl.Node()},
		}, metav1.CreateOptions{})
	case pod.Spec.NodeName != rt.kl.Node() || pod.Status.Phase == corev1.PodRunning:
		return nil
	}
	s, err := rt.serve(key, pod)
	if err != nil {
		return err
	}
	if _, err := rt.kl.Run(ctx, pod, s.ip); err != nil {
		return err
	}
	logf(rt.out, "pod %s runs at %s", key, s.ip)
	return nil
}

// serve starts the servers of pod (once) at its own IP.
func (rt *runtime) serve(key string, pod *corev1.Pod) (*podServer, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if s := rt.running[key]; s != nil {
		return s, nil
	}
	i := rt.nextIP
	rt.nextIP++
	s := &podServer{name: key, ip: fmt.Sprintf("10.244.%d.%d", i/256, i%256)}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			lis, err := net.Listen("tcp", net.JoinHostPort(s.ip, strconv.Itoa(int(p.ContainerPort))))
			if err != nil {
				s.close()
				return nil, err
			}
			srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(s.handle)}
			s.servers = append(s.servers, srv)
			s.wg.Go(func() { _ = srv.Serve(lis) })
		}
	}
	rt.running[key] = s
	return s, nil
}

func (s *podServer) handle(w http.ResponseWriter, _ *http.Request) {
	if s.failing.Load() {
		http.Error(w, "failing (flipped by the demo)", http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

func (s *podServer) close() {
	for _, srv := range s.servers {
		_ = srv.Close()
	}
	s.wg.Wait()
}

func (rt *runtime) remove(key string) {
	rt.mu.Lock()
	s := rt.running[key]
	delete(rt.running, key)
	rt.mu.Unlock()
	if s != nil {
		s.close()
		logf(rt.out, "pod %s stopped", key)
	}
}

// servers returns the running pods whose key (namespace/name) starts
// with prefix, by name.
func (rt *runtime) servers(prefix string) []*podServer {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var out []*podServer
	for key, s := range rt.running {
		if strings.HasPrefix(key, prefix) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *podServer) int { return strings.Compare(a.name, b.name) })
	return out
}
