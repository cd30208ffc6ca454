package chart_test

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/kube/internal/controlplane"
	"github.com/probed/probed/kube/internal/kubelet"
	"github.com/probed/probed/kube/internal/kubetest"
	"github.com/probed/probed/kube/internal/release"
)

// TestBudgetAllowsDrain applies the chart's PodDisruptionBudget of the
// controller for real, with the disruption controller of the real
// kube-controller-manager keeping its status, and evicts the two
// replicas as a node drain does: the first goes, the second waits until
// the first is replaced (429), and an unready replica goes at any time.
func TestBudgetAllowsDrain(t *testing.T) {
	env := kubetest.Get(t)
	ctx := t.Context()
	ns := env.Namespace(t, "probed-drain", nil)
	kl, err := kubelet.Start(ctx, env.Admin, "node-"+ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kl.Stop)
	r, err := release.Render(ctx, root(t), "probed", ns)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Plane.Config(controlplane.Admin))
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Admin.Discovery()))
	apply(t, dyn, mapper, r.Objects, ns, false, func(kind string) bool { return kind == "PodDisruptionBudget" })
	tmpl, err := r.PodSpec("Deployment", controllerName)
	if err != nil {
		t.Fatal(err)
	}
	// The disruption controller counts the pods a budget with
	// maxUnavailable expects from their controller's scale: the pods
	// belong to a ReplicaSet of two, as the Deployment's would (no
	// replicaset controller runs, so the test makes its pods).
	containers := []corev1.Container{{Name: "probed-kube", Image: tmpl.Spec.Containers[0].Image}}
	rs, err := env.Admin.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "probed-kube-1234"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels}, Spec: corev1.PodSpec{Containers: containers}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr(true)}
	pods := env.Admin.CoreV1().Pods(ns)
	var names []string
	for i := range 2 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probed-kube-%d", i), Labels: tmpl.Labels, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec:       corev1.PodSpec{NodeName: kl.Node(), Containers: containers},
		}
		created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kl.Run(ctx, created, kubetest.PodIP(40000+i)); err != nil {
			t.Fatal(err)
		}
		names = append(names, created.Name)
	}
	budget := func(allowed int32) {
		t.Helper()
		poll.UntilMet(t, "budget status", 30*time.Second, func() string {
			pdb, err := env.Admin.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, controllerName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pdb.Status.DisruptionsAllowed != allowed || pdb.Status.ObservedGeneration != pdb.Generation {
				return fmt.Sprintf("budget status %+v within 30 s; want %d disruptions allowed", pdb.Status, allowed)
			}
			return ""
		})
	}
	evict := func(name string) error {
		return pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	}
	budget(1)
	if err := evict(names[0]); err != nil {
		t.Fatalf("first eviction: %v", err)
	}
	budget(0) // the evicted pod terminates (no kubelet finishes it), unhealthy
	if err := evict(names[1]); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("second eviction while the first is not replaced: %v; want 429", err)
	}
	// An unready replica protects nothing: evicting it always goes.
	patch := []byte(`{"status":{"containerStatuses":[{"name":"probed-kube","ready":false}]}}`)
	if _, err := pods.Patch(ctx, names[1], types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	poll.UntilMet(t, "pod unready", 30*time.Second, func() string {
		p, err := pods.Get(ctx, names[1], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := kubelet.ReadyCondition(p); c.Status != corev1.ConditionFalse {
			return "pod still ready"
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse {
				return ""
			}
		}
		return "Ready not False within 30 s"
	})
	if err := evict(names[1]); err != nil {
		t.Errorf("eviction of an unready replica: %v; want it allowed (unhealthyPodEvictionPolicy AlwaysAllow)", err)
	}
}
