package chart_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/probed/probed/kube/internal/controlplane"
	"github.com/probed/probed/kube/internal/kubetest"
	"github.com/probed/probed/kube/internal/release"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, kubetest.WithHelm())) }

const (
	chartDir  = release.ChartDir
	namespace = "probed-system"
)

// root is the repository's root.
func root(t *testing.T) string {
	t.Helper()
	r, err := release.Root(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// helm runs the pinned helm in the repository's root and returns its
// output.
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := release.Helm(t.Context(), root(t), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// renderSet renders the chart with one --set of set ("": the defaults).
func renderSet(t *testing.T, set string) *release.Release {
	t.Helper()
	if set == "" {
		return render(t)
	}
	return render(t, "--set", set)
}

// render renders the chart as release "probed" in namespace with more
// helm arguments (--set ...).
func render(t *testing.T, args ...string) *release.Release {
	t.Helper()
	r, err := release.Render(t.Context(), root(t), "probed", namespace, args...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// set renders with --set of each value.
func set(t *testing.T, values ...string) *release.Release {
	t.Helper()
	var args []string
	for _, v := range values {
		args = append(args, "--set", v)
	}
	return render(t, args...)
}

func TestLint(t *testing.T) {
	helm(t, "lint", "--strict", chartDir)
	helm(t, "lint", "--strict", chartDir, "--set", "probed.store=etcd,probed.etcd.endpoints=http://etcd:2379,probed.replicas=3")
}

// TestDryRunApply applies the rendered manifests of several value sets
// to the real API server with server-side dry-run: every object is
// accepted as it is (the ServiceMonitor and cert-manager kinds against
// CRDs that hold them, their fields checked by TestServiceMonitors and
// TestCertManager).
func TestDryRunApply(t *testing.T) {
	env := kubetest.Get(t)
	tests := []struct {
		name string
		set  string
		want []string // kinds rendered
	}{
		{name: "default", want: []string{"StatefulSet", "Deployment", "Service", "Secret", "ConfigMap", "ServiceAccount", "ClusterRoleBinding", "ClusterRole", "RoleBinding", "Role", "PodDisruptionBudget", "MutatingWebhookConfiguration"}},
		{name: "etcd", set: "probed.store=etcd,probed.etcd.endpoints=https://etcd:2379,probed.replicas=3,probed.etcd.tls.existingSecret=etcd-client", want: []string{"StatefulSet", "PodDisruptionBudget"}},
		{name: "one namespace", set: "controller.watchNamespace=apps"},
		{name: "selectors", set: "controller.namespaceSelector.matchLabels.team=a,controller.namespaceSelector.matchExpressions[0].key=tier,controller.namespaceSelector.matchExpressions[0].operator=In,controller.namespaceSelector.matchExpressions[0].values[0]=web," +
			"controller.podSelector.matchExpressions[0].key=canary,controller.podSelector.matchExpressions[0].operator=DoesNotExist,controller.logFormat=text,controller.kubeAPI.qps=50.5"},
		{name: "everything on", set: "serviceMonitor.enabled=true,networkPolicy.enabled=true,certManager.enabled=true,auth.existingSecret=mine", want: []string{"ServiceMonitor", "NetworkPolicy", "Certificate", "Issuer"}},
		{name: "bring your own", set: "tls.existingSecret=a,auth.existingSecret=b,controller.webhook.tls.existingSecret=c,controller.webhook.tls.caBundle=Zm9v"},
		{name: "no controller", set: "controller.enabled=false", want: []string{"StatefulSet"}},
		{name: "placement", set: "probed.nodeSelector.disk=ssd,controller.priorityClassName=system-cluster-critical,imagePullSecrets[0].name=regcred," +
			"controller.tolerations[0].key=dedicated,controller.tolerations[0].operator=Exists,controller.topologySpreadConstraints[0].maxSkew=1," +
			"controller.topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone,controller.topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway," +
			"controller.topologySpreadConstraints[0].labelSelector.matchLabels.app\\.kubernetes\\.io/component=controller," +
			"probed.extraVolumes[0].name=scratch,probed.extraVolumes[0].emptyDir.medium=Memory,probed.extraVolumeMounts[0].name=scratch,probed.extraVolumeMounts[0].mountPath=/scratch"},
	}
	crds(t, env)
	dyn, err := dynamic.NewForConfig(env.Plane.Config(controlplane.Admin))
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Admin.Discovery()))
	for _, ns := range []string{namespace, "apps"} {
		createNamespace(t, env, ns)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := renderSet(t, tt.set)
			kinds := apply(t, dyn, mapper, r.Objects, namespace, true, nil)
			for _, k := range tt.want {
				if kinds[k] == 0 {
					t.Errorf("no %s rendered (%v)", k, kinds)
				}
			}
			t.Logf("applied (dry-run): %v", kinds)
		})
	}
}

func createNamespace(t *testing.T, env *kubetest.Env, name string) {
	t.Helper()
	_, err := env.Admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
}

// apply applies objs server-side (dry-run or for real) into namespace
// (helm install's --namespace), those whose kind keep says (all when
// nil), and counts them by kind.
func apply(t *testing.T, dyn dynamic.Interface, mapper meta.ResettableRESTMapper, objs []*unstructured.Unstructured, namespace string, dryRun bool, keep func(kind string) bool) map[string]int {
	t.Helper()
	kinds := map[string]int{}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		if keep != nil && !keep(gvk.Kind) {
			continue
		}
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			mapper.Reset() // a CRD created since the mapper cached discovery
			if m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				t.Fatalf("%s: %v", gvk, err)
			}
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = namespace
			}
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		data, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		opts := metav1.PatchOptions{FieldManager: "chart-test", Force: ptr(true)}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		if _, err := ri.Patch(t.Context(), obj.GetName(), types.ApplyPatchType, data, opts); err != nil {
			t.Errorf("server-side apply (dry run %v) of %s %s: %v", dryRun, gvk.Kind, obj.GetName(), err)
		}
		kinds[gvk.Kind]++
	}
	return kinds
}

func ptr[T any](v T) *T { return &v }

// TestRBACSuffices applies the chart's ServiceAccount and RBAC for real
// and asks the API server whether the controller's service account may do
// what probed-kube does with each scope's values (every namespace, a
// namespace selector, one namespace), and nothing it does not need.
func TestRBACSuffices(t *testing.T) {
	env := kubetest.Get(t)
	dyn, err := dynamic.NewForConfig(env.Plane.Config(controlplane.Admin))
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Admin.Discovery()))
	const ns = "probed-rbac"
	for _, n := range []string{ns, "apps", "other"} {
		createNamespace(t, env, n)
	}
	type access struct {
		namespace, verb, resource, subresource, group string
		allowed                                       bool
	}
	// What every scope needs in the namespaces it watches (apps), and
	// what none may.
	common := []access{
		{"apps", "list", "pods", "", "", true},
		{"apps", "watch", "pods", "", "", true},
		{"apps", "get", "pods", "", "", true},
		{"apps", "patch", "pods", "status", "", true},
		{"apps", "create", "events", "", "", true},
		{"apps", "create", "events", "", "events.k8s.io", true},
		{ns, "create", "leases", "", "coordination.k8s.io", true},
		{ns, "update", "leases", "", "coordination.k8s.io", true},
		{ns, "get", "leases", "", "coordination.k8s.io", true},
		// Nothing more: not the pods themselves, not their secrets.
		{"apps", "patch", "pods", "", "", false},
		{"apps", "delete", "pods", "", "", false},
		{"apps", "get", "secrets", "", "", false},
		{"apps", "update", "leases", "", "coordination.k8s.io", false},
		{"", "update", "namespaces", "", "", false},
	}
	namespaceReads := func(allowed bool) []access {
		return []access{
			{"", "list", "namespaces", "", "", allowed},
			{"", "watch", "namespaces", "", "", allowed},
			{"", "get", "namespaces", "", "", allowed},
		}
	}
	tests := []struct {
		name     string // the release's, so that each has RBAC objects of its own
		args     []string
		accesses []access
	}{
		{name: "every-namespace", accesses: append(namespaceReads(false), access{"other", "list", "pods", "", "", true})},
		{
			name:     "namespace-selector",
			args:     []string{"--set", "controller.namespaceSelector.matchLabels.team=a"},
			accesses: append(namespaceReads(true), access{"other", "list", "pods", "", "", true}),
		},
		{
			name: "one-namespace",
			args: []string{"--set", "controller.watchNamespace=apps"},
			accesses: append(namespaceReads(false),
				access{"other", "list", "pods", "", "", false},
				access{"other", "patch", "pods", "status", "", false}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := release.Render(t.Context(), root(t), tt.name, ns, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			apply(t, dyn, mapper, r.Objects, ns, false, func(kind string) bool {
				return kind == "ServiceAccount" || strings.Contains(kind, "Role")
			})
			user := "system:serviceaccount:" + ns + ":" + tt.name + "-probed-kube"
			for _, a := range append(slices.Clone(common), tt.accesses...) {
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User:   user,
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Namespace: a.namespace, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource,
					},
				}}
				got, err := env.Admin.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), sar, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got.Status.Allowed != a.allowed {
					t.Errorf("%s %s %s/%s (group %q) in %q: allowed %v; want %v (%s)", user, a.verb, a.resource, a.subresource, a.group, a.namespace, got.Status.Allowed, a.allowed, got.Status.Reason)
				}
			}
		})
	}
}
