package chart_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/kube/internal/controlplane"
	"github.com/probed/probed/kube/internal/kubetest"
	"github.com/probed/probed/kube/internal/release"
)

// crdKinds are the custom kinds the chart renders when asked: the
// Prometheus Operator's ServiceMonitor and cert-manager's Certificate and
// Issuer.
var crdKinds = []struct{ group, kind, plural string }{
	{"monitoring.coreos.com", "ServiceMonitor", "servicemonitors"},
	{"cert-manager.io", "Certificate", "certificates"},
	{"cert-manager.io", "Issuer", "issuers"},
}

// crds creates, once per plane, CRDs that hold the custom kinds (any
// spec: their operators' schemas are not vendored here; the fields are
// checked by the render tests), so that the API server accepts them.
func crds(t *testing.T, env *kubetest.Env) {
	t.Helper()
	var b strings.Builder
	for _, k := range crdKinds {
		fmt.Fprintf(&b, `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[3]s.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: %[2]s, plural: %[3]s, singular: %[4]s, listKind: %[2]sList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, k.group, k.kind, k.plural, strings.ToLower(k.kind))
	}
	objs, err := release.Decode([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Plane.Config(controlplane.Admin))
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Admin.Discovery()))
	apply(t, dyn, mapper, objs, "", false, nil)
	for _, k := range crdKinds {
		gvr := schema.GroupVersionResource{Group: k.group, Version: "v1", Resource: k.plural}
		poll.UntilMet(t, k.kind+" served", 30*time.Second, func() string {
			if _, err := dyn.Resource(gvr).Namespace("default").List(t.Context(), metav1.ListOptions{}); err != nil {
				return fmt.Sprintf("CRD of %s not served within 30 s: %v", k.kind, err)
			}
			return ""
		})
	}
}
