// Package kubelet is the one simulated part of the kube module's tests: a
// stand-in for the kubelet of one Node. It creates the Node, runs pods
// bound to it (phase Running, a pod IP the test chose, containers ready),
// and keeps each pod's Ready condition computed from its containers and
// readiness gates exactly as kubelet does (pkg/kubelet/status
// GeneratePodReadyCondition), keeping every condition it does not own.
package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Reasons and messages of the Ready condition, as kubelet writes them.
const (
	reasonContainersNotReady = "ContainersNotReady"
	reasonGatesNotReady      = "ReadinessGatesNotReady"
)

// Kubelet stands in for the kubelet of one Node.
type Kubelet struct {
	cs    kubernetes.Interface
	node  string
	queue workqueue.TypedRateLimitingInterface[string]
	pods  cache.Indexer
	wg    sync.WaitGroup
	stop  context.CancelFunc

	mu      sync.Mutex
	readyAt map[types.UID]time.Time // when Ready last turned True; guarded by mu
}

// Start creates the Node named node (Ready) and starts syncing the Ready
// condition of the pods bound to it. Stop stops it.
func Start(ctx context.Context, cs kubernetes.Interface, node string) (*Kubelet, error) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node},
	}
	created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create node: %w", err)
	}
	if err == nil {
		created.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}}
		created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.244.0.1"}}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("node status: %w", err)
		}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}))
	inf := factory.Core().V1().Pods().Informer()
	k := &Kubelet{
		cs: cs, node: node, pods: inf.GetIndexer(), stop: cancel,
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		readyAt: map[types.UID]time.Time{},
	}
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
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
	for range 4 {
		k.wg.Go(func() {
			for k.next(runCtx) {
			}
		})
	}
	k.wg.Go(func() {
		<-runCtx.Done()
		k.queue.ShutDown()
		factory.Shutdown()
	})
	return k, nil
}

// Stop stops syncing and waits for its goroutines.
func (k *Kubelet) Stop() {
	k.stop()
	k.wg.Wait()
}

// Node is the name of the Node.
func (k *Kubelet) Node() string { return k.node }

// Run makes pod Running with ip as its pod IP, its containers started and
// ready (restart count 0), as kubelet reports a pod whose containers
// started. Ready follows from the gates.
func (k *Kubelet) Run(ctx context.Context, pod *corev1.Pod, ip string) (*corev1.Pod, error) {
	now := metav1.Now()
	var statuses []corev1.ContainerStatus
	for _, c := range pod.Spec.Containers {
		started := true
		statuses = append(statuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: &started,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	status := map[string]any{
		"phase": corev1.PodRunning, "podIP": ip, "podIPs": []map[string]string{{"ip": ip}},
		"hostIP": "10.244.0.1", "startTime": now,
		"containerStatuses": statuses,
		"conditions": []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	return k.patchStatus(ctx, pod, status)
}

// SetIP changes the pod's IP, as after a sandbox restart.
func (k *Kubelet) SetIP(ctx context.Context, pod *corev1.Pod, ip string) (*corev1.Pod, error) {
	// A JSON merge patch: it replaces the podIPs list, which a strategic
	// merge would merge by IP.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   map[string]any{"podIP": ip, "podIPs": []map[string]string{{"ip": ip}}},
	})
	if err != nil {
		return nil, err
	}
	return k.cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
}

// RestartContainers counts one restart of each of the pod's containers,
// which are running and ready again.
func (k *Kubelet) RestartContainers(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	cur, err := k.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	statuses := cur.Status.ContainerStatuses
	now := metav1.Now()
	for i := range statuses {
		statuses[i].RestartCount++
		statuses[i].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
	}
	return k.patchStatus(ctx, cur, map[string]any{"containerStatuses": statuses})
}

// ReadyAt returns when the pod's Ready condition last turned True by this
// stand-in's patch (zero if never).
func (k *Kubelet) ReadyAt(uid types.UID) time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.readyAt[uid]
}

func (k *Kubelet) patchStatus(ctx context.Context, pod *corev1.Pod, status map[string]any) (*corev1.Pod, error) {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   status,
	})
	if err != nil {
		return nil, err
	}
	return k.cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
}

// next syncs one pod; false when the queue is shut down.
func (k *Kubelet) next(ctx context.Context) bool {
	key, shutdown := k.queue.Get()
	if shutdown {
		return false
	}
	defer k.queue.Done(key)
	if err := k.sync(ctx, key); err != nil && ctx.Err() == nil {
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

// sync writes the pod's Ready condition when it differs from what kubelet
// would compute.
func (k *Kubelet) sync(ctx context.Context, key string) error {
	obj, ok, err := k.pods.GetByKey(key)
	if err != nil || !ok {
		return err
	}
	pod := obj.(*corev1.Pod)
	if pod.Status.Phase != corev1.PodRunning {
		return nil
	}
	want := ReadyCondition(pod)
	var cur *corev1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			cur = &pod.Status.Conditions[i]
		}
	}
	if cur != nil && cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message {
		return nil
	}
	now := time.Now()
	want.LastTransitionTime = metav1.NewTime(now)
	if cur != nil && cur.Status == want.Status {
		want.LastTransitionTime = cur.LastTransitionTime
	}
	if _, err := k.patchStatus(ctx, pod, map[string]any{"conditions": []corev1.PodCondition{want}}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
			return nil // gone or replaced: its own events follow
		}
		return err
	}
	if want.Status == corev1.ConditionTrue && (cur == nil || cur.Status != corev1.ConditionTrue) {
		k.mu.Lock()
		k.readyAt[pod.UID] = now
		k.mu.Unlock()
	}
	return nil
}

// ReadyCondition computes the pod's Ready condition as kubelet does: True
// when every container is ready and the condition of every readiness gate
// is True.
func ReadyCondition(pod *corev1.Pod) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse}
	var notReady []string
	for _, spec := range pod.Spec.Containers {
		ready := false
		for _, s := range pod.Status.ContainerStatuses {
			if s.Name == spec.Name {
				ready = s.Ready
			}
		}
		if !ready {
			notReady = append(notReady, spec.Name)
		}
	}
	if len(notReady) > 0 {
		c.Reason = reasonContainersNotReady
		c.Message = fmt.Sprintf("containers with unready status: %v", notReady)
		return c
	}
	// In gate order, one message per gate, joined as kubelet joins them.
	var msgs []string
	for _, g := range pod.Spec.ReadinessGates {
		var cond *corev1.PodCondition
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == g.ConditionType {
				cond = &pod.Status.Conditions[i]
			}
		}
		switch {
		case cond == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
		case cond.Status != corev1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, cond.Status))
		}
	}
	if len(msgs) > 0 {
		c.Reason = reasonGatesNotReady
		c.Message = strings.Join(msgs, ", ")
		return c
	}
	c.Status = corev1.ConditionTrue
	return c
}
