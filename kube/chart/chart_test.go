package chart_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/probed/probed/kube/internal/controlplane"
	"github.com/probed/probed/kube/internal/kubetest"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// helm runs helm, pinned in kube/tools/go.mod, and returns its output.
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "go", append([]string{"tool", "-modfile=" + filepath.Join(root, "kube", "tools", "go.mod"), "helm"}, args...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

const chartDir = "deploy/helm/probed"

func TestLint(t *testing.T) {
	helm(t, "lint", "--strict", chartDir)
	helm(t, "lint", "--strict", chartDir, "--set", "probed.store=etcd,probed.etcd.endpoints=http://etcd:2379,probed.replicas=3")
}

func TestDryRunApply(t *testing.T) {
	env := kubetest.Get(t)
	tests := []struct {
		name string
		set  string
	}{
		{name: "default"},
		{name: "etcd", set: "probed.store=etcd,probed.etcd.endpoints=http://etcd:2379,probed.replicas=3"},
		{name: "one namespace", set: "controller.watchNamespace=apps"},
	}
	dyn, err := dynamic.NewForConfig(env.Plane.Config(controlplane.Admin))
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Admin.Discovery()))
	for _, ns := range []string{"probed-system", "apps"} {
		if _, err := env.Admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"template", "probed", chartDir, "--namespace", "probed-system"}
			if tt.set != "" {
				args = append(args, "--set", tt.set)
			}
			kinds := apply(t, dyn, mapper, helm(t, args...), "probed-system", true, nil)
			for _, k := range []string{"StatefulSet", "Deployment", "Service", "Secret", "ServiceAccount", "RoleBinding", "Role"} {
				if kinds[k] == 0 {
					t.Errorf("no %s rendered (%v)", k, kinds)
				}
			}
			t.Logf("applied (dry-run): %v", kinds)
		})
	}
}

// apply applies the manifests server-side (dry-run or for real) into
// namespace (helm install's --namespace), those whose kind keep says (all
// when nil), and counts them by kind.
func apply(t *testing.T, dyn dynamic.Interface, mapper meta.RESTMapper, manifests []byte, namespace string, dryRun bool, keep func(kind string) bool) map[string]int {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	kinds := map[string]int{}
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		if keep != nil && !keep(gvk.Kind) {
			continue
		}
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
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
// what probed-kube does, and nothing it does not need.
func TestRBACSuffices(t *testing.T) {
	env := kubetest.Get(t)
	dyn, err := dynamic.NewForConfig(env.Plane.Config(controlplane.Admin))
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Admin.Discovery()))
	const ns = "probed-rbac"
	if _, err := env.Admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	manifests := helm(t, "template", "probed", chartDir, "--namespace", ns)
	apply(t, dyn, mapper, manifests, ns, false, func(kind string) bool {
		return kind == "ServiceAccount" || strings.Contains(kind, "Role")
	})
	user := "system:serviceaccount:" + ns + ":probed-kube"
	tests := []struct {
		namespace, verb, resource, subresource, group string
		allowed                                       bool
	}{
		{"apps", "list", "pods", "", "", true},
		{"apps", "watch", "pods", "", "", true},
		{"apps", "get", "pods", "", "", true},
		{"apps", "patch", "pods", "status", "", true},
		{"apps", "create", "events", "", "", true},
		{ns, "create", "leases", "", "coordination.k8s.io", true},
		{ns, "update", "leases", "", "coordination.k8s.io", true},
		{ns, "get", "leases", "", "coordination.k8s.io", true},
		// Nothing more: not the pods themselves, not their secrets.
		{"apps", "patch", "pods", "", "", false},
		{"apps", "delete", "pods", "", "", false},
		{"apps", "get", "secrets", "", "", false},
		{"apps", "update", "leases", "", "coordination.k8s.io", false},
	}
	for _, tt := range tests {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: tt.namespace, Verb: tt.verb, Group: tt.group, Resource: tt.resource, Subresource: tt.subresource,
			},
		}}
		got, err := env.Admin.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allowed != tt.allowed {
			t.Errorf("%s %s %s/%s in %s: allowed %v; want %v (%s)", user, tt.verb, tt.resource, tt.subresource, tt.namespace, got.Status.Allowed, tt.allowed, got.Status.Reason)
		}
	}
}
