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

	corev1 "k8s.io/api/core/v1"
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
			manifests := helm(t, args...)
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
				m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err != nil {
					t.Fatalf("%s: %v", gvk, err)
				}
				var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
				if m.Scope.Name() == "namespace" {
					ns := obj.GetNamespace()
					if ns == "" {
						ns = "probed-system"
					}
					ri = dyn.Resource(m.Resource).Namespace(ns)
				}
				data, err := obj.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				force := true
				if _, err := ri.Patch(t.Context(), obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
					DryRun: []string{metav1.DryRunAll}, FieldManager: "chart-test", Force: &force,
				}); err != nil {
					t.Errorf("server-side dry-run apply of %s %s: %v", gvk.Kind, obj.GetName(), err)
				}
				kinds[gvk.Kind]++
			}
			for _, k := range []string{"StatefulSet", "Deployment", "Service", "Secret", "ServiceAccount", "RoleBinding", "Role"} {
				if kinds[k] == 0 {
					t.Errorf("no %s rendered (%v)", k, kinds)
				}
			}
			t.Logf("applied (dry-run): %v", kinds)
		})
	}
}
