// Package gate is probed-kube's readiness-gate controller: it registers a
// probed target for every pod that opts in (package podtarget), keeps the
// set of them in sync as one declarative set, and writes what probed says
// into the pod's own condition probed.io/ready, which kubelet folds into
// the pod's Ready (KEP-580) and EndpointSlices follow.
package gate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/probed/probed/client"
	"github.com/probed/probed/kube/podtarget"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Prober is what the controller needs of probed; *client.Client has all
// but Apply (see NewProber).
type Prober interface {
	// Apply makes the targets of owner within selector exactly desired.
	Apply(ctx context.Context, owner string, selector map[string]string, desired []*probev1.Target) (*probev1.ApplyTargetsResponse, error)
	// Reset returns a target's probes to their initial state.
	Reset(ctx context.Context, name string) (*probev1.Target, error)
	// Watch streams the events of the targets opts select.
	Watch(ctx context.Context, opts ...client.WatchOption) <-chan client.WatchResponse
}

// Options configure a Controller.
type Options struct {
	// Owner names the controller's set of targets in probed (a DNS-1123
	// label); default "probed-kube". Two controllers of one probed (two
	// clusters) need two owners.
	Owner string
	// Namespace limits the pods watched to one namespace; "" is all.
	Namespace string
	// Resync is how often the whole set is applied again even when no pod
	// changed (a target deleted behind the controller's back comes back);
	// default 5 minutes.
	Resync time.Duration
	// Workers patch pod conditions concurrently; default 8.
	Workers int
	// Clock is for tests; default the real clock.
	Clock clockwork.Clock
	// Metrics receives the controller's counters; default none.
	Metrics *Metrics
}

func (o *Options) defaults() {
	if o.Owner == "" {
		o.Owner = "probed-kube"
	}
	if o.Resync <= 0 {
		o.Resync = 5 * time.Minute
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
}

// Controller is one run of the controller.
type Controller struct {
	kube   kubernetes.Interface
	prober Prober
	opts   Options

	pods     cache.Indexer
	queue    workqueue.TypedRateLimitingInterface[string] // pod keys whose condition to check
	dirty    chan struct{}                                // one slot: the target set needs applying
	recorder record.EventRecorder

	mu       sync.Mutex
	states   map[string]targetState // by target name = pod key; guarded by mu
	invalid  map[string]badPod      // pods whose target cannot be applied; guarded by mu
	written  map[string]written     // last condition patched, by pod key; guarded by mu
	restarts map[string]restarts    // container restarts seen, by pod key; guarded by mu
	resets   map[string]bool        // targets to reset after the next apply; guarded by mu
	applied  map[string]string      // pod UID of each target applied, by name; guarded by mu
	warned   map[string]string      // the last warning Event sent, by pod key; guarded by mu
	synced   bool                   // the watch's snapshot is complete; guarded by mu
}

// badPod is why a pod has no target.
type badPod struct {
	uid    string
	reason string
	detail string
}

// written is the last condition patched on a pod, until the pod cache
// shows it.
type written struct {
	uid  string
	cond condition
	at   metav1.Time // its lastTransitionTime
}

type restarts struct {
	uid   string
	count int32
}

// New returns a controller of the pods kube sees and the targets of
// prober. Run runs it.
func New(kube kubernetes.Interface, prober Prober, opts Options) *Controller {
	opts.defaults()
	return &Controller{
		kube:   kube,
		prober: prober,
		opts:   opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "probed-kube"}),
		dirty:    make(chan struct{}, 1),
		states:   map[string]targetState{},
		invalid:  map[string]badPod{},
		written:  map[string]written{},
		restarts: map[string]restarts{},
		resets:   map[string]bool{},
		applied:  map[string]string{},
		warned:   map[string]string{},
	}
}

// Run runs the controller until ctx is done, and returns once every
// goroutine it started has stopped. It returns an error when it cannot go
// on (the pods cannot be listed, probed refuses the controller's
// credentials).
func (c *Controller) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	factory := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace(c.opts.Namespace))
	defer func() {
		// In this order: the goroutines stop on ctx, the informers once
		// ctx is done, and the Events already recorded are sent last.
		cancel()
		c.queue.ShutDown()
		wg.Wait()
		factory.Shutdown()
		broadcaster.Shutdown()
	}()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
	c.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: c.opts.Owner})

	inf := factory.Core().V1().Pods().Informer()
	c.pods = inf.GetIndexer()
	if err := inf.SetTransform(stripManagedFields); err != nil {
		return err
	}
	listErr := make(chan error, 1)
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		select {
		case listErr <- err:
		default:
		}
	}); err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podChanged(nil, obj) },
		UpdateFunc: c.podChanged,
		DeleteFunc: func(obj any) { c.podChanged(obj, nil) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if err := c.waitSynced(ctx, inf, listErr); err != nil {
		return err
	}

	errs := make(chan error, 2)
	wg.Go(func() { errs <- c.watch(ctx) })
	wg.Go(func() { errs <- c.syncTargets(ctx) })
	for range c.opts.Workers {
		wg.Go(func() {
			for c.nextCondition(ctx) {
			}
		})
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
}

// waitSynced waits for the pod cache; a list the API server refuses (RBAC)
// is an error at once rather than a silent wait.
func (c *Controller) waitSynced(ctx context.Context, inf cache.SharedIndexInformer, listErr <-chan error) error {
	tick := c.opts.Clock.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !inf.HasSynced() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-listErr:
			if isForbidden(err) {
				return fmt.Errorf("list pods: %w (probed-kube needs get, list and watch on pods, patch on pods/status, create on events)", err)
			}
		case <-tick.Chan():
		}
	}
	return nil
}

// podChanged notes a pod's change: its condition is checked and the target
// set applied again.
func (c *Controller) podChanged(oldObj, newObj any) {
	pod := asPod(newObj)
	old := asPod(oldObj)
	if pod == nil && old == nil {
		return
	}
	key := podKey(pod, old)
	if (pod == nil || !podtarget.OptedIn(pod)) && (old == nil || !podtarget.OptedIn(old)) {
		return
	}
	if pod != nil {
		n := restartCount(pod)
		c.mu.Lock()
		prev, seen := c.restarts[key]
		if seen && prev.uid == string(pod.UID) && n > prev.count {
			c.resets[key] = true
		}
		c.restarts[key] = restarts{uid: string(pod.UID), count: n}
		c.mu.Unlock()
	} else {
		c.mu.Lock()
		delete(c.restarts, key)
		delete(c.written, key)
		delete(c.invalid, key)
		delete(c.warned, key)
		c.mu.Unlock()
	}
	if pod != nil && old != nil && !targetChanged(old, pod) {
		// Only the status (e.g. our own condition) changed: the set stays.
		c.queue.Add(key)
		return
	}
	c.markDirty()
	c.queue.Add(key)
}

// targetChanged reports whether a pod update can change its target.
func targetChanged(old, pod *corev1.Pod) bool {
	return old.UID != pod.UID ||
		old.Status.PodIP != pod.Status.PodIP ||
		old.Annotations[podtarget.ProbesAnnotation] != pod.Annotations[podtarget.ProbesAnnotation] ||
		(old.DeletionTimestamp == nil) != (pod.DeletionTimestamp == nil) ||
		podtarget.OptedIn(old) != podtarget.OptedIn(pod) ||
		restartCount(old) != restartCount(pod)
}

func (c *Controller) markDirty() {
	select {
	case c.dirty <- struct{}{}:
	default:
	}
}

func restartCount(pod *corev1.Pod) int32 {
	var n int32
	for _, s := range pod.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

func asPod(obj any) *corev1.Pod {
	switch o := obj.(type) {
	case *corev1.Pod:
		return o
	case cache.DeletedFinalStateUnknown:
		p, _ := o.Obj.(*corev1.Pod)
		return p
	}
	return nil
}

func podKey(pod, old *corev1.Pod) string {
	if pod == nil {
		pod = old
	}
	return podtarget.Name(pod.Namespace, pod.Name)
}

// warnLocked sends a Warning Event about pod, unless the same one was the
// last sent for this pod (an apply repeats on every pod change). c.mu is
// held.
func (c *Controller) warnLocked(pod *corev1.Pod, reason, detail string) {
	key := podtarget.Name(pod.Namespace, pod.Name)
	sig := string(pod.UID) + "\x00" + reason + "\x00" + detail
	if c.warned[key] == sig {
		return
	}
	c.warned[key] = sig
	c.recorder.Event(pod, corev1.EventTypeWarning, reason, bound(detail))
}

// stripManagedFields drops what the controller never reads from the pods
// it caches (it watches every pod of the cluster).
func stripManagedFields(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		pod.ManagedFields = nil
	}
	return obj, nil
}
