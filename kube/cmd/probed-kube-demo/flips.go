package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/probed/probed/kube/podtarget"
)

// The example's objects (examples/kubernetes/web.yaml).
const (
	webNamespace = "default"
	webService   = "web"
)

// flipper flips the web pods' health in turn and reports when each flip
// reached the pod's gate condition and the Service's EndpointSlice, as
// the demo's informers see them.
type flipper struct {
	rt   *runtime
	out  io.Writer
	halt context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	gate    map[string]seen // pod name → its probed.io/ready is True; guarded by mu
	ready   map[string]seen // endpoint address → ready in the EndpointSlice; guarded by mu
	changed chan struct{}   // closed and replaced on every change; guarded by mu
}

// seen is a state and when the informer saw it start.
type seen struct {
	on bool
	at time.Time
}

func startFlipper(ctx context.Context, cs kubernetes.Interface, rt *runtime, out io.Writer) (*flipper, error) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := &flipper{rt: rt, out: out, halt: cancel, gate: map[string]seen{}, ready: map[string]seen{}, changed: make(chan struct{})}
	pods := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(webNamespace))
	slices := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(webNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName + "=" + webService }))
	podInf := pods.Core().V1().Pods().Informer()
	sliceInf := slices.Discovery().V1().EndpointSlices().Informer()
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: f.pod, UpdateFunc: func(_, obj any) { f.pod(obj) },
	}); err != nil {
		cancel()
		return nil, err
	}
	if _, err := sliceInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: f.slice, UpdateFunc: func(_, obj any) { f.slice(obj) },
	}); err != nil {
		cancel()
		return nil, err
	}
	pods.Start(runCtx.Done())
	slices.Start(runCtx.Done())
	f.wg.Go(func() {
		<-runCtx.Done()
		pods.Shutdown()
		slices.Shutdown()
	})
	return f, nil
}

func (f *flipper) stop() {
	f.halt()
	f.wg.Wait()
}

// pod records the gate condition of a pod.
func (f *flipper) pod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	on := false
	for _, c := range pod.Status.Conditions {
		if c.Type == podtarget.GateType {
			on = c.Status == corev1.ConditionTrue
		}
	}
	f.set(f.gate, pod.Name, on)
}

// slice records the readiness of each endpoint of a slice.
func (f *flipper) slice(obj any) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	for _, ep := range s.Endpoints {
		on := ep.Conditions.Ready != nil && *ep.Conditions.Ready
		for _, addr := range ep.Addresses {
			f.set(f.ready, addr, on)
		}
	}
}

func (f *flipper) set(m map[string]seen, key string, on bool) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := m[key]; ok && cur.on == on {
		return
	}
	m[key] = seen{on: on, at: now}
	close(f.changed)
	f.changed = make(chan struct{})
}

// await waits until m[key] is on (or off) and returns when that started;
// false after limit.
func (f *flipper) await(ctx context.Context, m map[string]seen, key string, on bool, limit time.Duration) (time.Time, bool) {
	timeout := time.NewTimer(limit)
	defer timeout.Stop()
	for {
		f.mu.Lock()
		cur, ok := m[key]
		changed := f.changed
		f.mu.Unlock()
		if ok && cur.on == on {
			return cur.at, true
		}
		select {
		case <-changed:
		case <-timeout.C:
			return time.Time{}, false
		case <-ctx.Done():
			return time.Time{}, false
		}
	}
}

// run waits for the pods web pods to run and be ready, then flips one
// every every, printing the latencies, until ctx ends or after flips
// flips (0: no limit).
func (f *flipper) run(ctx context.Context, pods int, every time.Duration, flips int) error {
	start := time.Now()
	var web []*podServer
	for len(web) < max(pods, 1) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		web = f.rt.servers(webNamespace + "/" + webService + "-")
		if time.Since(start) > 2*time.Minute {
			return fmt.Errorf("%d of %d web pods run within 2 min", len(web), pods)
		}
	}
	for _, s := range web {
		name := strings.TrimPrefix(s.name, webNamespace+"/")
		if _, ok := f.await(ctx, f.gate, name, true, 2*time.Minute); !ok {
			return fmt.Errorf("pod %s not ready through probed-kube within 2 min", name)
		}
		if _, ok := f.await(ctx, f.ready, s.ip, true, time.Minute); !ok {
			return fmt.Errorf("pod %s (%s) not ready in the EndpointSlice within 1 min", name, s.ip)
		}
	}
	logf(f.out, "%d web pods ready through probed.io/ready and in the EndpointSlice, %v after the demo applied them; flipping one every %v (Ctrl-C stops)", len(web), time.Since(start).Round(time.Millisecond), every)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for n := 1; flips == 0 || n <= flips; n++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		web = f.rt.servers(webNamespace + "/" + webService + "-")
		if len(web) == 0 {
			continue
		}
		s := web[(n-1)/2%len(web)] // each pod fails, then recovers: one out at a time
		name := strings.TrimPrefix(s.name, webNamespace+"/")
		failing := !s.failing.Load()
		flipped := time.Now()
		s.failing.Store(failing)
		want, what := !failing, "healthy → failing (503)"
		if !failing {
			what = "failing → healthy (200)"
		}
		gateAt, ok1 := f.await(ctx, f.gate, name, want, 30*time.Second)
		sliceAt, ok2 := f.await(ctx, f.ready, s.ip, want, 30*time.Second)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		logf(f.out, "flip %d: %s (%s) %s: probed.io/ready=%s after %s, EndpointSlice ready=%v after %s",
			n, name, s.ip, what, condition(want), latency(gateAt.Sub(flipped), ok1), want, latency(sliceAt.Sub(flipped), ok2))
	}
	return nil
}

func condition(on bool) string {
	if on {
		return "True"
	}
	return "False"
}

func latency(d time.Duration, ok bool) string {
	if !ok {
		return "never (30 s)"
	}
	return d.Round(time.Millisecond).String()
}
