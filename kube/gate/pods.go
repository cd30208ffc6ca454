package gate

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Scope narrows what the controller watches.
type Scope struct {
	// Namespace is the one namespace watched; "" is all.
	Namespace string
	// NamespaceSelector keeps the pods of the namespaces whose labels it
	// matches; nil keeps all. It needs list and watch on namespaces.
	NamespaceSelector labels.Selector
	// PodSelector keeps the pods whose labels it matches; nil keeps all.
	// The API server filters: the others never reach the controller.
	PodSelector labels.Selector
}

// Pods is the controller's cache of the pods in its Scope (and of the
// namespaces, with a namespace selector). Every replica starts it and
// keeps it synced, leading or not, so that a replica that takes the Lease
// starts from a warm cache, not from a LIST of every pod.
type Pods struct {
	scope      Scope
	factory    informers.SharedInformerFactory
	nsFactory  informers.SharedInformerFactory // nil without a namespace selector
	pods       cache.SharedIndexInformer
	namespaces cache.SharedIndexInformer // nil without a namespace selector
	listErr    chan error                // the first list or watch errors, one slot
}

// NewPods returns the cache of the pods of scope; Start starts it.
func NewPods(kube kubernetes.Interface, scope Scope) (*Pods, error) {
	opts := []informers.SharedInformerOption{informers.WithNamespace(scope.Namespace)}
	if scope.PodSelector != nil && !scope.PodSelector.Empty() {
		sel := scope.PodSelector.String()
		opts = append(opts, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	}
	p := &Pods{scope: scope, listErr: make(chan error, 1)}
	p.factory = informers.NewSharedInformerFactoryWithOptions(kube, 0, opts...)
	p.pods = p.factory.Core().V1().Pods().Informer()
	if err := p.pods.SetTransform(stripManagedFields); err != nil {
		return nil, err
	}
	handler := func(_ context.Context, _ *cache.Reflector, err error) {
		select {
		case p.listErr <- err:
		default:
		}
	}
	if err := p.pods.SetWatchErrorHandlerWithContext(handler); err != nil {
		return nil, err
	}
	if scope.NamespaceSelector != nil && !scope.NamespaceSelector.Empty() {
		// Namespaces are cluster-scoped: a factory of their own.
		p.nsFactory = informers.NewSharedInformerFactoryWithOptions(kube, 0)
		p.namespaces = p.nsFactory.Core().V1().Namespaces().Informer()
		if err := p.namespaces.SetWatchErrorHandlerWithContext(handler); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Start starts the informers and returns once their first list is in
// the cache; a list the API server refuses (RBAC) is an error at once
// rather than a silent wait. Shutdown stops them.
func (p *Pods) Start(ctx context.Context) error {
	p.factory.Start(ctx.Done())
	if p.nsFactory != nil {
		p.nsFactory.Start(ctx.Done())
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !p.HasSynced() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-p.listErr:
			if isForbidden(err) {
				return fmt.Errorf("list pods: %w (probed-kube needs get, list and watch on pods (and namespaces with a namespace selector), patch on pods/status, create on events)", err)
			}
		case <-tick.C:
		}
	}
	return nil
}

// HasSynced reports whether the first list of every informer is cached.
func (p *Pods) HasSynced() bool {
	return p.pods.HasSynced() && (p.namespaces == nil || p.namespaces.HasSynced())
}

// Shutdown waits for the informers to stop: the context Start was given
// must be done first.
func (p *Pods) Shutdown() {
	p.factory.Shutdown()
	if p.nsFactory != nil {
		p.nsFactory.Shutdown()
	}
}

// inScope reports whether the namespace of pod is selected. A namespace
// the cache does not know (yet) is not.
func (p *Pods) inScope(namespace string) bool {
	if p.namespaces == nil {
		return true
	}
	obj, ok, err := p.namespaces.GetIndexer().GetByKey(namespace)
	if err != nil || !ok {
		return false
	}
	return p.scope.NamespaceSelector.Matches(labels.Set(obj.(*corev1.Namespace).Labels))
}

// inNamespace returns the cached pods of namespace.
func (p *Pods) inNamespace(namespace string) []*corev1.Pod {
	objs, err := p.pods.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		out = append(out, obj.(*corev1.Pod))
	}
	return out
}

// namespaceNames returns the namespaces that have cached pods.
func (p *Pods) namespaceNames() []string {
	return p.pods.GetIndexer().ListIndexFuncValues(cache.NamespaceIndex)
}

// get returns the cached pod of key (namespace/name).
func (p *Pods) get(key string) (*corev1.Pod, bool) {
	obj, ok, err := p.pods.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*corev1.Pod), true
}

// stripManagedFields drops what the controller never reads from the pods
// it caches (it may watch every pod of the cluster).
func stripManagedFields(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		pod.ManagedFields = nil
	}
	return obj, nil
}
