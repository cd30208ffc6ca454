package chart_test

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/probed/probed/kube/internal/controlplane"
	"github.com/probed/probed/kube/internal/kubetest"
	"github.com/probed/probed/kube/internal/release"
)

// TestGeneratedSecretsKeptAcrossUpgrades renders the chart against the
// real API server (helm template --dry-run=server, whose lookup reads the
// cluster as helm upgrade does): an upgrade keeps the generated keys and
// tokens, so the pods' checksums stay and nothing rolls; a Secret deleted
// to rotate it is generated anew, and the checksums of the pods that
// mount it change, so they roll.
func TestGeneratedSecretsKeptAcrossUpgrades(t *testing.T) {
	env := kubetest.Get(t)
	ctx := t.Context()
	const ns = "probed-upgrade"
	createNamespace(t, env, ns)
	kubeconfig, err := env.Plane.Kubeconfig(controlplane.Admin)
	if err != nil {
		t.Fatal(err)
	}
	upgrade := func() *release.Release {
		t.Helper()
		r, err := release.Render(ctx, root(t), "probed", ns, "--dry-run=server", "--kubeconfig", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	type state struct {
		secrets   map[string]map[string][]byte
		checksums map[string]string // "component annotation" → sum
	}
	observe := func(r *release.Release) state {
		t.Helper()
		s := state{secrets: map[string]map[string][]byte{}, checksums: map[string]string{}}
		for _, name := range []string{"probed-tls", "probed-auth", "probed-kube-webhook-tls"} {
			data, err := r.SecretData(name)
			if err != nil || data == nil {
				t.Fatalf("Secret %s: %v", name, err)
			}
			s.secrets[name] = data
		}
		probed, controller := pods(t, r)
		for k, v := range probed.Annotations {
			s.checksums["probed "+k] = v
		}
		for k, v := range controller.Annotations {
			s.checksums["controller "+k] = v
		}
		return s
	}
	dyn, err := dynamic.NewForConfig(env.Plane.Config(controlplane.Admin))
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Admin.Discovery()))
	install := upgrade()
	apply(t, dyn, mapper, install.Objects, ns, false, func(kind string) bool { return kind == "Secret" })
	installed := observe(install)

	upgraded := observe(upgrade())
	for name, data := range installed.secrets {
		if !maps.EqualFunc(data, upgraded.secrets[name], func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Errorf("an upgrade changed Secret %s", name)
		}
	}
	if !maps.Equal(installed.checksums, upgraded.checksums) {
		t.Errorf("an upgrade changed the pods' checksums (they would roll):\n%v\n%v", installed.checksums, upgraded.checksums)
	}

	if err := env.Admin.CoreV1().Secrets(ns).Delete(ctx, "probed-auth", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rotated := observe(upgrade())
	if string(rotated.secrets["probed-auth"]["token"]) == string(installed.secrets["probed-auth"]["token"]) {
		t.Error("the deleted token Secret came back with the same token")
	}
	for key, before := range installed.checksums {
		changed := rotated.checksums[key] != before
		if want := key == "probed checksum/auth" || key == "controller checksum/auth"; changed != want {
			t.Errorf("%s changed: %v; want %v", key, changed, want)
		}
	}
}
