// Package gate is probed-kube's readiness-gate controller: it registers a
// probed target for every pod that opts in (package podtarget), keeps
// them in sync as one declarative set per namespace, and writes what
// probed says into the pod's own condition probed.io/ready, which kubelet
// folds into the pod's Ready (KEP-580) and EndpointSlices follow.
package gate

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
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

// Defaults of Options.
const (
	DefaultOwner          = "probed-kube"
	DefaultResync         = 5 * time.Minute
	DefaultWorkers        = 8
	DefaultMinInterval    = time.Second
	DefaultExpectationTTL = 30 * time.Second
)

// Options configure a Controller.
type Options struct {
	// Owner names the controller's targets in probed (a DNS-1123 label);
	// default "probed-kube". Two controllers of one probed (two clusters)
	// need two owners.
	Owner string
	// Scope narrows the pods watched when Pods is nil.
	Scope Scope
	// Pods is the pod cache, started and synced by the caller (before
	// leader election); nil: Run starts one of Scope and stops it.
	Pods *Pods
	// Resync is how often every namespace's set is applied again even
	// when no pod changed (a target deleted behind the controller's back
	// comes back); default 5 minutes.
	Resync time.Duration
	// Workers patch pod conditions concurrently; default 8.
	Workers int
	// MinInterval is the least time between two condition writes of one
	// pod: a flip after a quiet MinInterval is written at once, a pod
	// that flips faster is written at most once per MinInterval, with
	// its latest state; default 1 s.
	MinInterval time.Duration
	// ExpectationTTL bounds how long a written condition that the pod
	// cache does not show yet is trusted; default 30 s.
	ExpectationTTL time.Duration
	// Clock is for tests; default the real clock.
	Clock clockwork.Clock
	// Metrics receives the controller's counters; default none.
	Metrics *Metrics
}

func (o *Options) defaults() {
	if o.Owner == "" {
		o.Owner = DefaultOwner
	}
	if o.Resync <= 0 {
		o.Resync = DefaultResync
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.MinInterval <= 0 {
		o.MinInterval = DefaultMinInterval
	}
	if o.ExpectationTTL <= 0 {
		o.ExpectationTTL = DefaultExpectationTTL
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

	pods     *Pods
	queue    workqueue.TypedRateLimitingInterface[string] // pod keys whose condition to check
	dirty    chan struct{}                                // one slot: namespaces need applying
	recorder record.EventRecorder

	mu        sync.Mutex
	dirtyNS   map[string]bool        // namespaces whose set to apply; guarded by mu
	allDirty  bool                   // every namespace's set to apply; guarded by mu
	states    map[string]targetState // by target name = pod key; guarded by mu
	nsTargets map[string]int         // states per namespace; guarded by mu
	verdicts  map[string]verdict     // each pod's target or why it has none; guarded by mu
	conflicts map[string]conflict    // pods whose target name another owner holds; guarded by mu
	written   map[string]written     // conditions patched, by pod key, until the cache shows them; guarded by mu
	lastWrite map[string]time.Time   // when each pod's condition was last patched; guarded by mu
	restarts  map[string]restarts    // container restarts seen, by pod key; guarded by mu
	resets    map[string]bool        // targets to reset after the next apply; guarded by mu
	applied   map[string]string      // pod UID of each target applied, by name; guarded by mu
	warned    map[string]string      // the last warning Event sent, by pod key; guarded by mu
	mistakes  map[string]string      // pod UID and reason of the last gate mistake reported, by pod key; guarded by mu
	synced    bool                   // the watch's snapshot is complete; guarded by mu
}

// conflict is a pod whose target name another owner holds in probed.
type conflict struct {
	uid     string
	message string
}

// written is the last condition patched on a pod, until the pod cache
// shows it or it expires.
type written struct {
	uid     string
	cond    condition
	at      corev1.PodCondition // as patched: status and lastTransitionTime
	expires time.Time
}

type restarts struct {
	uid   string
	count int32
}

// New returns a controller of the pods kube sees and the targets of
// prober. Run runs it.
func New(kube kubernetes.Interface, prober Prober, opts Options) *Controller {
	opts.defaults()
	qc := workqueue.TypedRateLimitingQueueConfig[string]{Name: queueName}
	if opts.Metrics.queue != nil {
		qc.MetricsProvider = opts.Metrics.queue
	}
	return &Controller{
		kube:      kube,
		prober:    prober,
		opts:      opts,
		queue:     workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), qc),
		dirty:     make(chan struct{}, 1),
		dirtyNS:   map[string]bool{},
		states:    map[string]targetState{},
		nsTargets: map[string]int{},
		verdicts:  map[string]verdict{},
		conflicts: map[string]conflict{},
		written:   map[string]written{},
		lastWrite: map[string]time.Time{},
		restarts:  map[string]restarts{},
		resets:    map[string]bool{},
		applied:   map[string]string{},
		warned:    map[string]string{},
		mistakes:  map[string]string{},
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
	var registrations []func()
	stopPods := func() {}
	defer func() {
		// In this order: the goroutines stop on ctx, the handlers are
		// removed, a pod cache of this run stops, and the Events already
		// recorded are sent last.
		cancel()
		c.queue.ShutDown()
		wg.Wait()
		for _, remove := range registrations {
			remove()
		}
		stopPods()
		broadcaster.Shutdown()
	}()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
	c.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: c.opts.Owner})

	c.pods = c.opts.Pods
	if c.pods == nil {
		pods, err := NewPods(c.kube, c.opts.Scope)
		if err != nil {
			return err
		}
		podsCtx, cancelPods := context.WithCancel(ctx)
		stopPods = func() { cancelPods(); pods.Shutdown() }
		if err := pods.Start(podsCtx); err != nil {
			return err
		}
		c.pods = pods
	}
	reg, err := c.pods.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podChanged(nil, obj) },
		UpdateFunc: c.podChanged,
		DeleteFunc: func(obj any) { c.podChanged(obj, nil) },
	})
	if err != nil {
		return err
	}
	registrations = append(registrations, func() { _ = c.pods.pods.RemoveEventHandler(reg) })
	if c.pods.namespaces != nil {
		nsReg, err := c.pods.namespaces.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: c.namespaceChanged,
		})
		if err != nil {
			return err
		}
		registrations = append(registrations, func() { _ = c.pods.namespaces.RemoveEventHandler(nsReg) })
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

// podChanged notes a pod's change: its condition is checked and its
// namespace's set applied again when its target may have changed.
func (c *Controller) podChanged(oldObj, newObj any) {
	pod := asPod(newObj)
	old := asPod(oldObj)
	if pod == nil && old == nil {
		return
	}
	if pod != nil && !c.pods.inScope(pod.Namespace) {
		if old == nil {
			old = pod // the key of the pod treated as deleted
		}
		pod = nil // as if deleted: a namespace the selector leaves out
	}
	key := podKey(pod, old)
	if pod != nil {
		c.checkGates(pod)
	} else {
		c.forget(key)
	}
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
	}
	if pod != nil && old != nil && !targetChanged(old, pod) {
		// Only the status (e.g. our own condition) changed: the set stays.
		c.queue.Add(key)
		return
	}
	ns := old
	if pod != nil {
		ns = pod
	}
	c.markDirty(ns.Namespace)
	c.queue.Add(key)
}

// forget drops what the controller remembers of a pod that is gone.
func (c *Controller) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.restarts, key)
	delete(c.written, key)
	delete(c.lastWrite, key)
	delete(c.verdicts, key)
	delete(c.conflicts, key)
	delete(c.warned, key)
	delete(c.mistakes, key)
}

// namespaceChanged applies a namespace's set again, and checks its pods,
// when its labels change whether the namespace selector selects it.
func (c *Controller) namespaceChanged(oldObj, newObj any) {
	old, okOld := oldObj.(*corev1.Namespace)
	ns, okNew := newObj.(*corev1.Namespace)
	if !okOld || !okNew || c.pods.scope.NamespaceSelector == nil {
		return
	}
	if c.pods.scope.NamespaceSelector.Matches(labels.Set(old.Labels)) == c.pods.scope.NamespaceSelector.Matches(labels.Set(ns.Labels)) {
		return
	}
	for _, pod := range c.pods.inNamespace(ns.Name) {
		if !c.pods.inScope(ns.Name) {
			c.forget(podtarget.Name(pod.Namespace, pod.Name))
		}
		c.queue.Add(podtarget.Name(pod.Namespace, pod.Name))
	}
	c.markDirty(ns.Name)
}

// targetChanged reports whether a pod update can change its target.
func targetChanged(old, pod *corev1.Pod) bool {
	return old.UID != pod.UID ||
		old.Status.PodIP != pod.Status.PodIP ||
		targetSum(old) != targetSum(pod) ||
		(old.DeletionTimestamp == nil) != (pod.DeletionTimestamp == nil) ||
		podtarget.OptedIn(old) != podtarget.OptedIn(pod) ||
		isFinished(old) != isFinished(pod) ||
		restartCount(old) != restartCount(pod)
}

// markDirty notes that namespace's set needs applying.
func (c *Controller) markDirty(namespace string) {
	c.mu.Lock()
	c.dirtyNS[namespace] = true
	c.mu.Unlock()
	c.signal()
}

// markAllDirty notes that every namespace's set needs applying.
func (c *Controller) markAllDirty() {
	c.mu.Lock()
	c.allDirty = true
	c.mu.Unlock()
	c.signal()
}

func (c *Controller) signal() {
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
