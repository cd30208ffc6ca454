package chart_test

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/probed/probed/kube/image"
	"github.com/probed/probed/kube/internal/release"
)

// Names of the default release "probed".
const (
	probedName     = "probed"
	controllerName = "probed-kube"
	probedHost     = "probed.probed-system.svc"
	webhookHost    = "probed-kube.probed-system.svc"
)

// pods returns the pod templates of probed's StatefulSet and the
// controller's Deployment (nil when not rendered).
func pods(t *testing.T, r *release.Release) (probed, controller *corev1.PodTemplateSpec) {
	t.Helper()
	var err error
	if r.Find("StatefulSet", probedName) != nil {
		if probed, err = r.PodSpec("StatefulSet", probedName); err != nil {
			t.Fatal(err)
		}
	}
	if r.Find("Deployment", controllerName) != nil {
		if controller, err = r.PodSpec("Deployment", controllerName); err != nil {
			t.Fatal(err)
		}
	}
	return probed, controller
}

func convert[T any](t *testing.T, obj *unstructured.Unstructured) *T {
	t.Helper()
	if obj == nil {
		t.Fatal("object not rendered")
	}
	v := new(T)
	if err := release.Convert(obj, v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDefaultImageIsWhatMakeImageWrites: every container of a default
// install runs the reference `make image` tags (image.ChartRef, which
// probed-image --chart uses).
func TestDefaultImageIsWhatMakeImageWrites(t *testing.T) {
	want, err := image.ChartRef(filepath.Join(root(t), chartDir))
	if err != nil {
		t.Fatal(err)
	}
	if want != "probed:dev" {
		t.Logf("the chart's default image is %s", want)
	}
	digest := "sha256:" + strings.Repeat("ab", 32)
	tests := []struct {
		name string
		set  []string
		want string
	}{
		{name: "default", want: want},
		{name: "registry", set: []string{"image.repository=registry.example/platform/probed,image.tag=v0.9.0"}, want: "registry.example/platform/probed:v0.9.0"},
		{name: "digest", set: []string{"image.digest=" + digest}, want: "probed@" + digest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := set(t, tt.set...)
			probed, controller := pods(t, r)
			for _, p := range []*corev1.PodTemplateSpec{probed, controller} {
				for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
					if c.Image != tt.want {
						t.Errorf("container %s runs %s; want %s", c.Name, c.Image, tt.want)
					}
				}
			}
		})
	}
}

// TestSchemaRefuses: values.schema.json and the templates' checks fail a
// wrong value at render time, naming it.
func TestSchemaRefuses(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // in the error
	}{
		{name: "unknown store", args: []string{"--set", "probed.store=sqlite"}, want: []string{"store", "bolt"}},
		{name: "wrong type", args: []string{"--set", "controller.replicas=two"}, want: []string{"replicas"}},
		{name: "duration as a number", args: []string{"--set", "probed.minPeriod=20"}, want: []string{"minPeriod"}},
		{name: "bad duration", args: []string{"--set", "controller.leaseDuration=15 seconds"}, want: []string{"leaseDuration"}},
		{name: "unknown key", args: []string{"--set", "probed.replicaCount=3"}, want: []string{"replicaCount"}},
		{name: "unknown top-level key", args: []string{"--set", "replicaCount=3"}, want: []string{"replicaCount"}},
		{name: "budget that blocks drains", args: []string{"--set", "controller.podDisruptionBudget.maxUnavailable=0"}, want: []string{"maxUnavailable"}},
		{name: "budget 0%", args: []string{"--set", "controller.podDisruptionBudget.maxUnavailable=0%"}, want: []string{"maxUnavailable"}},
		{name: "pull policy", args: []string{"--set", "image.pullPolicy=Sometimes"}, want: []string{"pullPolicy"}},
		{name: "failure policy", args: []string{"--set", "controller.webhook.failurePolicy=Maybe"}, want: []string{"failurePolicy"}},
		{name: "unknown verb", args: []string{"--set-json", `auth.extraRules=[{"identities":["ops"],"names":[""],"verbs":["delete"]}]`}, want: []string{"verbs"}},
		{name: "rule without names", args: []string{"--set-json", `auth.extraRules=[{"identities":["ops"],"verbs":["read"]}]`}, want: []string{"names"}},
		{name: "issuer without name", args: []string{"--set", "certManager.enabled=true,certManager.issuerRef.kind=ClusterIssuer"}, want: []string{"issuerRef"}},
		{name: "etcd without endpoints", args: []string{"--set", "probed.store=etcd"}, want: []string{"probed.etcd.endpoints"}},
		{name: "webhook secret without its CA", args: []string{"--set", "controller.webhook.tls.existingSecret=mine"}, want: []string{"caBundle"}},
		{name: "ServiceMonitor without a token", args: []string{"--set", "serviceMonitor.enabled=true,auth.prometheus.enabled=false"}, want: []string{"auth.prometheus.enabled"}},
		{name: "log format", args: []string{"--set", "controller.logFormat=xml"}, want: []string{"logFormat"}},
		{name: "log level", args: []string{"--set", "probed.logLevel=trace"}, want: []string{"logLevel"}},
		{name: "no requests per second", args: []string{"--set", "controller.kubeAPI.qps=0"}, want: []string{"qps"}},
		{name: "no requests per second, a string", args: []string{"--set-string", "controller.kubeAPI.qps=0.0"}, want: []string{"qps"}},
		{name: "requests per second not a number", args: []string{"--set", "controller.kubeAPI.qps=fast"}, want: []string{"qps"}},
		{name: "fractional burst", args: []string{"--set", "controller.kubeAPI.burst=1.5"}, want: []string{"burst"}},
		{name: "no workers", args: []string{"--set", "controller.workers=0"}, want: []string{"workers"}},
		{name: "zero interval", args: []string{"--set", "controller.conditionMinInterval=0s"}, want: []string{"conditionMinInterval"}},
		{name: "zero resync", args: []string{"--set", "controller.resync=0"}, want: []string{"resync"}},
		{name: "selector as a string", args: []string{"--set", "controller.namespaceSelector=team=a"}, want: []string{"namespaceSelector"}},
		{name: "In without values", args: []string{"--set-json", `controller.namespaceSelector={"matchExpressions":[{"key":"team","operator":"In"}]}`}, want: []string{"namespaceSelector", "values"}},
		{name: "Exists with values", args: []string{"--set-json", `controller.podSelector={"matchExpressions":[{"key":"team","operator":"Exists","values":["a"]}]}`}, want: []string{"podSelector", "values"}},
		{name: "unknown operator", args: []string{"--set-json", `controller.podSelector={"matchExpressions":[{"key":"team","operator":"Gt","values":["1"]}]}`}, want: []string{"operator"}},
		{name: "bad label key", args: []string{"--set-json", `controller.podSelector={"matchLabels":{"-app":"web"}}`}, want: []string{"podSelector"}},
		{name: "bad label value", args: []string{"--set-json", `controller.namespaceSelector={"matchLabels":{"team":"a b"}}`}, want: []string{"namespaceSelector"}},
		{name: "namespace selector with one namespace", args: []string{"--set", "controller.watchNamespace=apps,controller.namespaceSelector.matchLabels.team=a"}, want: []string{"controller.namespaceSelector", "controller.watchNamespace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := release.Render(t.Context(), root(t), "probed", namespace, tt.args...)
			if err == nil {
				t.Fatalf("rendered with %v; want an error", tt.args)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not name %q: %v", w, err)
				}
			}
		})
	}
}

// TestGitOpsRendersAreIdentical: with the Secrets brought along (or made
// by cert-manager), two renders are byte-identical and hold no Secret; the
// default generates its three, anew each render (helm template has no
// cluster to look them up in).
func TestGitOpsRendersAreIdentical(t *testing.T) {
	tests := []struct {
		name string
		set  string
	}{
		{name: "existing secrets", set: "tls.existingSecret=my-tls,auth.existingSecret=my-auth,controller.webhook.tls.existingSecret=my-webhook,controller.webhook.tls.caBundle=Q0E="},
		{name: "cert-manager", set: "certManager.enabled=true,auth.existingSecret=my-auth"},
		{name: "cert-manager with a ClusterIssuer", set: "certManager.enabled=true,certManager.issuerRef.name=corp-ca,certManager.issuerRef.kind=ClusterIssuer,auth.existingSecret=my-auth,serviceMonitor.enabled=true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := set(t, tt.set), set(t, tt.set)
			if !bytes.Equal(a.Manifests, b.Manifests) {
				t.Errorf("two renders differ:\n%s", cmp.Diff(string(a.Manifests), string(b.Manifests)))
			}
			if s := a.Kind("Secret"); len(s) > 0 {
				t.Errorf("%d Secrets rendered (%s, ...)", len(s), s[0].GetName())
			}
		})
	}
	a, b := render(t), render(t)
	if got := len(a.Kind("Secret")); got != 3 {
		t.Errorf("default: %d Secrets; want 3 (TLS, tokens, webhook TLS)", got)
	}
	if bytes.Equal(a.Manifests, b.Manifests) {
		t.Error("default: two renders are identical; want new keys and tokens each")
	}
}

// TestExistingSecrets: the workloads mount the Secrets named, and the
// webhook trusts the CA given.
func TestExistingSecrets(t *testing.T) {
	r := set(t, "tls.existingSecret=my-tls,auth.existingSecret=my-auth,controller.webhook.tls.existingSecret=my-webhook,controller.webhook.tls.caBundle=Q0E=")
	probed, controller := pods(t, r)
	want := map[string]string{"tls": "my-tls", "auth": "my-auth", "webhook-tls": "my-webhook"}
	for _, p := range []*corev1.PodTemplateSpec{probed, controller} {
		for _, v := range p.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName != want[v.Name] {
				t.Errorf("volume %s mounts Secret %s; want %s", v.Name, v.Secret.SecretName, want[v.Name])
			}
		}
		for k := range p.Annotations {
			if k != "checksum/policy" && strings.HasPrefix(k, "checksum/") {
				t.Errorf("annotation %s: no Secret is generated to sum", k)
			}
		}
	}
	mwc := convert[admissionv1.MutatingWebhookConfiguration](t, r.Find("MutatingWebhookConfiguration", controllerName))
	if got := string(mwc.Webhooks[0].ClientConfig.CABundle); got != "CA" {
		t.Errorf("caBundle %q; want the one given", got)
	}
}

// TestCertManager: cert-manager issues probed's and the webhook's
// certificates into the Secrets the pods mount, its CA injector fills the
// webhook's caBundle, and without an issuerRef the chart's own CA chain
// issues them.
func TestCertManager(t *testing.T) {
	type ref struct{ Name, Kind, Group string }
	type certificate struct {
		Spec struct {
			SecretName string
			CommonName string
			DNSNames   []string
			IsCA       bool
			IssuerRef  ref
			Usages     []string
		}
	}
	cert := func(r *release.Release, name string) certificate {
		t.Helper()
		obj := r.Find("Certificate", name)
		if obj == nil {
			t.Fatalf("no Certificate %s", name)
		}
		var c certificate
		data, _ := obj.MarshalJSON()
		if err := yaml.Unmarshal(data, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	r := set(t, "certManager.enabled=true,auth.existingSecret=my-auth")
	probed, controller := pods(t, r)
	secretOf := func(p *corev1.PodTemplateSpec, volume string) string {
		for _, v := range p.Spec.Volumes {
			if v.Name == volume && v.Secret != nil {
				return v.Secret.SecretName
			}
		}
		t.Fatalf("no Secret volume %s", volume)
		return ""
	}
	tlsCert := cert(r, "probed-tls")
	if tlsCert.Spec.SecretName != secretOf(probed, "tls") || tlsCert.Spec.SecretName != secretOf(controller, "tls") {
		t.Errorf("probed's Certificate writes %s; the pods mount %s and %s", tlsCert.Spec.SecretName, secretOf(probed, "tls"), secretOf(controller, "tls"))
	}
	if !slices.Contains(tlsCert.Spec.DNSNames, probedHost) || !slices.Contains(tlsCert.Spec.DNSNames, "*.probed-headless.probed-system.svc") {
		t.Errorf("probed's certificate names %v", tlsCert.Spec.DNSNames)
	}
	whCert := cert(r, "probed-kube-webhook")
	if whCert.Spec.SecretName != secretOf(controller, "webhook-tls") {
		t.Errorf("the webhook's Certificate writes %s; the controller mounts %s", whCert.Spec.SecretName, secretOf(controller, "webhook-tls"))
	}
	if !slices.Contains(whCert.Spec.DNSNames, webhookHost) {
		t.Errorf("the webhook's certificate names %v; want %s", whCert.Spec.DNSNames, webhookHost)
	}
	mwc := convert[admissionv1.MutatingWebhookConfiguration](t, r.Find("MutatingWebhookConfiguration", controllerName))
	if got, want := mwc.Annotations["cert-manager.io/inject-ca-from"], namespace+"/probed-kube-webhook"; got != want {
		t.Errorf("inject-ca-from %q; want %q", got, want)
	}
	if len(mwc.Webhooks[0].ClientConfig.CABundle) != 0 {
		t.Error("caBundle set: cert-manager injects it")
	}
	// The chart's CA: self-signed Issuer → CA Certificate → CA Issuer.
	for _, c := range []certificate{tlsCert, whCert} {
		if c.Spec.IssuerRef != (ref{Name: "probed-ca", Kind: "Issuer", Group: "cert-manager.io"}) {
			t.Errorf("issuerRef %+v; want the chart's CA Issuer", c.Spec.IssuerRef)
		}
	}
	caIssuer := r.Find("Issuer", "probed-ca")
	caSecret, _, _ := unstructured.NestedString(caIssuer.Object, "spec", "ca", "secretName")
	ca := cert(r, "probed-ca")
	if !ca.Spec.IsCA || ca.Spec.SecretName != caSecret || ca.Spec.IssuerRef.Name != "probed-selfsigned" {
		t.Errorf("CA Certificate %+v; CA Issuer's Secret %s", ca.Spec, caSecret)
	}
	if _, ok, _ := unstructured.NestedMap(r.Find("Issuer", "probed-selfsigned").Object, "spec", "selfSigned"); !ok {
		t.Error("Issuer probed-selfsigned is not selfSigned")
	}

	r = set(t, "certManager.enabled=true,certManager.issuerRef.name=corp-ca,certManager.issuerRef.kind=ClusterIssuer,certManager.issuerRef.group=cert-manager.io,auth.existingSecret=my-auth")
	if got := r.Kind("Issuer"); len(got) != 0 {
		t.Errorf("%d Issuers rendered with an issuerRef given", len(got))
	}
	if got := cert(r, "probed-tls").Spec.IssuerRef; got != (ref{Name: "corp-ca", Kind: "ClusterIssuer", Group: "cert-manager.io"}) {
		t.Errorf("issuerRef %+v; want the one given", got)
	}
}

// sum is the checksum the chart annotates for a Secret's data (sha256 of
// Helm's toYaml of it).
func sum(t *testing.T, r *release.Release, secret string) string {
	t.Helper()
	obj := r.Find("Secret", secret)
	if obj == nil {
		t.Fatalf("no Secret %s", secret)
	}
	data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
	y, err := yaml.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(bytes.TrimSuffix(y, []byte("\n")))
	return hex.EncodeToString(h[:])
}

// TestChecksums: the pods carry the checksums of the Secrets the chart
// generates (both workloads the same, so a rotation rolls both) and of the
// policy, which change with their content and only then.
func TestChecksums(t *testing.T) {
	r := render(t)
	probed, controller := pods(t, r)
	for _, c := range []struct {
		annotation, secret string
		pods               []*corev1.PodTemplateSpec
	}{
		{"checksum/tls", "probed-tls", []*corev1.PodTemplateSpec{probed, controller}},
		{"checksum/auth", "probed-auth", []*corev1.PodTemplateSpec{probed, controller}},
		{"checksum/webhook-tls", "probed-kube-webhook-tls", []*corev1.PodTemplateSpec{controller}},
	} {
		want := sum(t, r, c.secret)
		for _, p := range c.pods {
			if got := p.Annotations[c.annotation]; got != want {
				t.Errorf("%s of %s: %q; want the sum of the rendered Secret %s, %q", c.annotation, p.Labels["app.kubernetes.io/component"], got, c.secret, want)
			}
		}
	}
	if got := r.Kind("Secret"); len(got) != 3 {
		t.Fatalf("%d Secrets", len(got))
	}

	policySum := func(args ...string) string {
		t.Helper()
		p, _ := pods(t, render(t, args...))
		s := p.Annotations["checksum/policy"]
		if s == "" {
			t.Fatal("no checksum/policy")
		}
		return s
	}
	byo := []string{"--set", "tls.existingSecret=a,auth.existingSecret=b"}
	base := policySum(byo...)
	if again := policySum(byo...); again != base {
		t.Errorf("checksum/policy changed with nothing changed: %s, %s", base, again)
	}
	for name, args := range map[string][]string{
		"extra rule":         {"--set-json", `auth.extraRules=[{"identities":["ops"],"names":[""],"verbs":["read"]}]`},
		"no prometheus":      {"--set", "auth.prometheus.enabled=false"},
		"watched namespace":  {"--set", "controller.watchNamespace=apps"},
		"another extra rule": {"--set-json", `auth.extraRules=[{"identities":["ops"],"names":["apps/"],"verbs":["read"]}]`},
	} {
		if got := policySum(append(byo, args...)...); got == base {
			t.Errorf("%s: checksum/policy did not change", name)
		}
	}
}

// TestPolicy: probed's authorization policy lets the controller read,
// write and operate on its pods' targets, and Prometheus only scrape.
func TestPolicy(t *testing.T) {
	type rule struct{ Identities, Names, Verbs []string }
	tests := []struct {
		name string
		args []string
		want []rule
	}{
		{name: "default", want: []rule{
			{[]string{"probed-kube"}, []string{""}, []string{"read", "write", "operate"}},
			{[]string{"prometheus"}, []string{""}, []string{"metrics"}},
		}},
		{name: "one namespace, no prometheus, a rule of mine", args: []string{"--set", "controller.watchNamespace=apps,auth.prometheus.enabled=false", "--set-json", `auth.extraRules=[{"identities":["ops"],"names":[""],"verbs":["read"]}]`}, want: []rule{
			{[]string{"probed-kube"}, []string{"apps/"}, []string{"read", "write", "operate"}},
			{[]string{"ops"}, []string{""}, []string{"read"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, tt.args...)
			cm := convert[corev1.ConfigMap](t, r.Find("ConfigMap", "probed-policy"))
			var got struct{ Rules []rule }
			if err := yaml.UnmarshalStrict([]byte(cm.Data["policy.yaml"]), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			probed, _ := pods(t, r)
			if !slices.Contains(probed.Spec.Containers[0].Args, "--authz-policy=/etc/probed/policy/policy.yaml") {
				t.Errorf("probed's args %v lack the policy", probed.Spec.Containers[0].Args)
			}
			tokens, err := r.SecretData("probed-auth")
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]string{} // identity → token
			for line := range strings.Lines(string(tokens["tokens"])) {
				f := strings.Fields(line)
				if len(f) != 2 {
					t.Fatalf("tokens line %q", line)
				}
				names[f[1]] = f[0]
			}
			if names["probed-kube"] != string(tokens["token"]) || len(names["probed-kube"]) < 32 {
				t.Errorf("the controller's token is not the one named probed-kube in tokens")
			}
			if prom := names["prometheus"]; (prom != "") != (len(tt.want) > 1 && tt.want[1].Identities[0] == "prometheus") || prom != string(tokens["prometheus-token"]) {
				t.Errorf("prometheus token %q, named in tokens %q", tokens["prometheus-token"], prom)
			}
		})
	}
}

// TestPodDisruptionBudgets: a budget for each workload with several
// replicas, allowing one eviction at a time (maxUnavailable, never a
// minAvailable equal to the replicas) and the eviction of unhealthy pods,
// whose selector is the workload's.
func TestPodDisruptionBudgets(t *testing.T) {
	tests := []struct {
		name                 string
		set                  string
		probed, controller   string // maxUnavailable, "" for no budget
		probedSel, ctrlerSel bool
	}{
		{name: "default", controller: "1"},
		{name: "one controller", set: "controller.replicas=1"},
		{name: "etcd cluster", set: "probed.store=etcd,probed.etcd.endpoints=http://etcd:2379,probed.replicas=3", probed: "1", controller: "1"},
		{name: "etcd, one replica", set: "probed.store=etcd,probed.etcd.endpoints=http://etcd:2379,probed.replicas=1", controller: "1"},
		{name: "percent", set: "controller.replicas=4,controller.podDisruptionBudget.maxUnavailable=50%", controller: "50%"},
		{name: "off", set: "controller.podDisruptionBudget.enabled=false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := renderSet(t, tt.set)
			for _, w := range []struct{ name, kind, want string }{{probedName, "StatefulSet", tt.probed}, {controllerName, "Deployment", tt.controller}} {
				obj := r.Find("PodDisruptionBudget", w.name)
				if (obj != nil) != (w.want != "") {
					t.Fatalf("budget %s rendered: %v; want %v", w.name, obj != nil, w.want != "")
				}
				if obj == nil {
					continue
				}
				pdb := convert[policyv1.PodDisruptionBudget](t, obj)
				if pdb.Spec.MinAvailable != nil || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.String() != w.want {
					t.Errorf("%s: minAvailable %v, maxUnavailable %v; want maxUnavailable %s only", w.name, pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable, w.want)
				}
				if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
					t.Errorf("%s: unhealthyPodEvictionPolicy %v; want AlwaysAllow", w.name, p)
				}
				sel, _, _ := unstructured.NestedStringMap(r.Find(w.kind, w.name).Object, "spec", "selector", "matchLabels")
				if diff := cmp.Diff(sel, pdb.Spec.Selector.MatchLabels); diff != "" {
					t.Errorf("%s: the budget's selector differs from the %s's (-workload +budget):\n%s", w.name, w.kind, diff)
				}
			}
		})
	}
}

// TestPodSettings: the scheduling, pull, annotation, label, resource and
// volume values reach each workload's pods.
func TestPodSettings(t *testing.T) {
	values := `
imagePullSecrets: [{name: regcred}]
%[1]s:
  nodeSelector: {disk: ssd}
  tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]}}}
  topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app.kubernetes.io/component: %[1]s}}}]
  priorityClassName: system-cluster-critical
  podAnnotations: {team: platform}
  podLabels: {cost-center: "42"}
  resources: {requests: {cpu: 7m}}
  extraVolumes: [{name: scratch, emptyDir: {}}]
  extraVolumeMounts: [{name: scratch, mountPath: /scratch}]
`
	for _, w := range []struct{ key, component string }{{"probed", "probed"}, {"controller", "controller"}} {
		t.Run(w.key, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "values.yaml")
			if err := writeFile(file, strings.ReplaceAll(strings.ReplaceAll(values, "%[1]s", w.key), "component: "+w.key, "component: "+w.component)); err != nil {
				t.Fatal(err)
			}
			probed, controller := pods(t, render(t, "-f", file))
			p, other := probed, controller
			if w.key == "controller" {
				p, other = controller, probed
			}
			s := p.Spec
			c := s.Containers[0]
			checks := []struct {
				what string
				ok   bool
			}{
				{"imagePullSecrets", len(s.ImagePullSecrets) == 1 && s.ImagePullSecrets[0].Name == "regcred"},
				{"nodeSelector", s.NodeSelector["disk"] == "ssd"},
				{"tolerations", len(s.Tolerations) == 1 && s.Tolerations[0].Key == "dedicated"},
				{"affinity", s.Affinity != nil && s.Affinity.NodeAffinity != nil && s.Affinity.PodAntiAffinity == nil},
				{"topologySpreadConstraints", len(s.TopologySpreadConstraints) == 1 && s.TopologySpreadConstraints[0].MaxSkew == 1},
				{"priorityClassName", s.PriorityClassName == "system-cluster-critical"},
				{"podAnnotations", p.Annotations["team"] == "platform"},
				{"podLabels", p.Labels["cost-center"] == "42" && p.Labels["app.kubernetes.io/component"] == w.component},
				{"resources", c.Resources.Requests.Cpu().String() == "7m"},
				{"extraVolumes", slices.ContainsFunc(s.Volumes, func(v corev1.Volume) bool { return v.Name == "scratch" && v.EmptyDir != nil })},
				{"extraVolumeMounts", slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "scratch" && m.MountPath == "/scratch" })},
				// The other workload keeps its own settings but the pull secrets.
				{"other's nodeSelector", len(other.Spec.NodeSelector) == 0 && len(other.Spec.ImagePullSecrets) == 1},
			}
			for _, ch := range checks {
				if !ch.ok {
					t.Errorf("%s not applied to the %s's pods", ch.what, w.key)
				}
			}
		})
	}
	// By default, several replicas prefer distinct nodes.
	_, controller := pods(t, render(t))
	aa := controller.Spec.Affinity
	if aa == nil || aa.PodAntiAffinity == nil || aa.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("the controller's default affinity %+v; want a preferred anti-affinity per node", aa)
	}
}

// TestEtcdTLS: the etcd TLS values reach probed's etcd flags.
func TestEtcdTLS(t *testing.T) {
	const base = "probed.store=etcd,probed.etcd.endpoints=https://etcd:2379,probed.replicas=3,probed.etcd.tls.existingSecret=etcd-client"
	tests := []struct {
		name, set string
		want      []string
		not       []string
	}{
		{name: "client certificate", set: base, want: []string{"--etcd-ca=/etc/probed/etcd/ca.crt", "--etcd-cert=/etc/probed/etcd/tls.crt", "--etcd-key=/etc/probed/etcd/tls.key"}},
		{name: "CA only", set: base + ",probed.etcd.tls.clientCertificate=false", want: []string{"--etcd-ca=/etc/probed/etcd/ca.crt"}, not: []string{"--etcd-cert", "--etcd-key"}},
		{name: "plain", set: "probed.store=etcd,probed.etcd.endpoints=http://etcd:2379", not: []string{"--etcd-ca", "--etcd-cert"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			probed, _ := pods(t, set(t, tt.set))
			args := probed.Spec.Containers[0].Args
			for _, w := range tt.want {
				if !slices.Contains(args, w) {
					t.Errorf("args %v lack %s", args, w)
				}
			}
			for _, n := range tt.not {
				if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, n) }) {
					t.Errorf("args %v have %s", args, n)
				}
			}
			mounted := slices.ContainsFunc(probed.Spec.Volumes, func(v corev1.Volume) bool {
				return v.Secret != nil && v.Secret.SecretName == "etcd-client"
			})
			if mounted != (len(tt.want) > 0) {
				t.Errorf("Secret etcd-client mounted: %v", mounted)
			}
		})
	}
}

// servicePort returns the target of the port named port of the Service
// that selector selects (its labels hold selector), and that Service.
func servicePort(t *testing.T, r *release.Release, selector map[string]string, port string) (*corev1.Service, corev1.ServicePort) {
	t.Helper()
	for _, obj := range r.Kind("Service") {
		svc := convert[corev1.Service](t, obj)
		matches := true
		for k, v := range selector {
			matches = matches && svc.Labels[k] == v
		}
		if !matches {
			continue
		}
		for _, p := range svc.Spec.Ports {
			if p.Name == port {
				return svc, p
			}
		}
	}
	t.Fatalf("no Service labelled %v with a port %s", selector, port)
	return nil, corev1.ServicePort{}
}

// containerPort returns the number of the container's port a Service's
// targetPort names, and checks that the Service selects the pods.
func containerPort(t *testing.T, svc *corev1.Service, target intstr.IntOrString, pod *corev1.PodTemplateSpec) int32 {
	t.Helper()
	for k, v := range svc.Spec.Selector {
		if pod.Labels[k] != v {
			t.Errorf("Service %s selects %s=%s; the pods have %q", svc.Name, k, v, pod.Labels[k])
		}
	}
	for _, p := range pod.Spec.Containers[0].Ports {
		if p.Name == target.StrVal || p.ContainerPort == target.IntVal {
			return p.ContainerPort
		}
	}
	t.Fatalf("Service %s targets port %v, which the container does not have", svc.Name, target)
	return 0
}

// hasArg reports whether args hold flag=value.
func hasArg(args []string, flag, value string) bool { return slices.Contains(args, flag+"="+value) }

// TestServiceMonitors: the ServiceMonitors decode strictly as the
// Prometheus Operator's, and reach what serves /metrics: probed over
// https, verifying the certificate under a name it holds with the CA of
// its Secret, sending the token of the identity the policy lets scrape;
// the controller over http on its health port.
func TestServiceMonitors(t *testing.T) {
	r := set(t, "serviceMonitor.enabled=true,serviceMonitor.labels.release=kube-prometheus-stack,serviceMonitor.interval=15s")
	probed, controller := pods(t, r)
	decode := func(name string) *monitoringv1.ServiceMonitor {
		obj := r.Find("ServiceMonitor", name)
		if obj == nil {
			t.Fatalf("no ServiceMonitor %s", name)
		}
		data, _ := obj.MarshalJSON()
		var sm monitoringv1.ServiceMonitor
		if err := yaml.UnmarshalStrict(data, &sm); err != nil {
			t.Fatalf("ServiceMonitor %s is not the Prometheus Operator's: %v", name, err)
		}
		if sm.Labels["release"] != "kube-prometheus-stack" || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Interval != "15s" {
			t.Errorf("%s: labels %v, endpoints %+v", name, sm.Labels, sm.Spec.Endpoints)
		}
		if !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{namespace}) {
			t.Errorf("%s: namespaces %v", name, sm.Spec.NamespaceSelector.MatchNames)
		}
		return &sm
	}

	sm := decode(probedName)
	ep := sm.Spec.Endpoints[0]
	svc, port := servicePort(t, r, sm.Spec.Selector.MatchLabels, ep.Port)
	num := containerPort(t, svc, port.TargetPort, probed)
	args := probed.Spec.Containers[0].Args
	if !hasArg(args, "--metrics-addr", "0.0.0.0:"+itoa(num)) || ep.Path != "/metrics" {
		t.Errorf("scrapes %s of port %d; probed's args %v", ep.Path, num, args)
	}
	if ep.Scheme == nil || *ep.Scheme != "https" || ep.TLSConfig == nil {
		t.Fatalf("scheme %v, TLS %+v; want https with a TLS config", ep.Scheme, ep.TLSConfig)
	}
	tc := ep.TLSConfig
	if tc.InsecureSkipVerify != nil && *tc.InsecureSkipVerify {
		t.Error("insecureSkipVerify")
	}
	if tc.CA.Secret == nil || tc.CA.Secret.Name != "probed-tls" || tc.CA.Secret.Key != "ca.crt" {
		t.Fatalf("CA %+v; want probed-tls's ca.crt", tc.CA)
	}
	tlsData, err := r.SecretData("probed-tls")
	if err != nil {
		t.Fatal(err)
	}
	if tc.ServerName == nil || *tc.ServerName != probedHost {
		t.Fatalf("serverName %v; want %s", tc.ServerName, probedHost)
	}
	verify(t, tlsData["ca.crt"], tlsData["tls.crt"], *tc.ServerName)
	auth := ep.Authorization
	if auth == nil || auth.Type != "Bearer" || auth.Credentials == nil || auth.Credentials.Name != "probed-auth" || auth.Credentials.Key != "prometheus-token" {
		t.Fatalf("authorization %+v; want Bearer with probed-auth's prometheus-token", auth)
	}
	tokens, err := r.SecretData("probed-auth")
	if err != nil {
		t.Fatal(err)
	}
	if tok := string(tokens["prometheus-token"]); tok == "" || !strings.Contains(string(tokens["tokens"]), tok+" prometheus\n") {
		t.Errorf("prometheus-token is not the token of identity prometheus in tokens")
	}

	sm = decode(controllerName)
	ep = sm.Spec.Endpoints[0]
	svc, port = servicePort(t, r, sm.Spec.Selector.MatchLabels, ep.Port)
	num = containerPort(t, svc, port.TargetPort, controller)
	if !hasArg(controller.Spec.Containers[0].Args, "--health-addr", "0.0.0.0:"+itoa(num)) || ep.Path != "/metrics" || ep.Scheme == nil || *ep.Scheme != "http" {
		t.Errorf("the controller's ServiceMonitor scrapes %v %s on %d; args %v", ep.Scheme, ep.Path, num, controller.Spec.Containers[0].Args)
	}
	if svc.Name != controllerName {
		t.Errorf("the controller's metrics Service is %s", svc.Name)
	}
}

// verify checks that certPEM is signed by caPEM for name.
func verify(t *testing.T, caPEM, certPEM []byte, name string) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA certificate")
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("no certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
		t.Errorf("certificate for %v does not verify as %s: %v", cert.DNSNames, name, err)
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// TestWebhook: the MutatingWebhookConfiguration calls /mutate-v1-pod on
// port 443 of the controller's Service, which sends it to port 9443 of
// every replica (the Service selects them all, not the leader), for pod
// creations in the namespaces that opt in, failing open within 5 s; its
// caBundle verifies the serving certificate the controller mounts.
func TestWebhook(t *testing.T) {
	r := render(t)
	_, controller := pods(t, r)
	mwc := convert[admissionv1.MutatingWebhookConfiguration](t, r.Find("MutatingWebhookConfiguration", controllerName))
	if len(mwc.Webhooks) != 1 {
		t.Fatalf("%d webhooks", len(mwc.Webhooks))
	}
	wh := mwc.Webhooks[0]
	cc := wh.ClientConfig
	if cc.Service == nil || cc.Service.Name != controllerName || cc.Service.Namespace != namespace || *cc.Service.Path != "/mutate-v1-pod" || *cc.Service.Port != 443 {
		t.Fatalf("clientConfig %+v", cc.Service)
	}
	svc := convert[corev1.Service](t, r.Find("Service", controllerName))
	var target intstr.IntOrString
	for _, p := range svc.Spec.Ports {
		if p.Port == 443 {
			target = p.TargetPort
		}
	}
	if num := containerPort(t, svc, target, controller); num != 9443 {
		t.Errorf("the webhook's Service reaches container port %d; want 9443", num)
	}
	dep := r.Find("Deployment", controllerName)
	sel, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "selector", "matchLabels")
	if diff := cmp.Diff(sel, svc.Spec.Selector); diff != "" {
		t.Errorf("the Service does not select every replica (-Deployment's selector +Service's):\n%s", diff)
	}
	args := controller.Spec.Containers[0].Args
	for _, a := range []string{"--webhook-addr=:9443", "--webhook-cert-file=/etc/probed-kube/webhook/tls.crt", "--webhook-key-file=/etc/probed-kube/webhook/tls.key"} {
		if !slices.Contains(args, a) {
			t.Errorf("args %v lack %s", args, a)
		}
	}
	ignore, none := admissionv1.Ignore, admissionv1.SideEffectClassNone
	want := admissionv1.MutatingWebhook{
		Name:                    "gate.probed.io",
		AdmissionReviewVersions: []string{"v1"},
		SideEffects:             &none,
		FailurePolicy:           &ignore,
		TimeoutSeconds:          ptr(int32(5)),
		ClientConfig:            cc,
		NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"probed.io/readiness-gate-inject": "enabled"}},
		Rules: []admissionv1.RuleWithOperations{{
			Operations: []admissionv1.OperationType{admissionv1.Create},
			Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: ptr(admissionv1.NamespacedScope)},
		}},
	}
	if diff := cmp.Diff(want, wh); diff != "" {
		t.Errorf("webhook (-want +got):\n%s", diff)
	}
	secret, err := r.SecretData("probed-kube-webhook-tls")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cc.CABundle, secret["ca.crt"]) {
		t.Error("caBundle is not the webhook Secret's CA")
	}
	verify(t, cc.CABundle, secret["tls.crt"], webhookHost)
	mounted := slices.ContainsFunc(controller.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == "probed-kube-webhook-tls"
	})
	if !mounted {
		t.Error("the controller does not mount the webhook's Secret")
	}

	// One namespace: only it gets gates the controller will serve.
	r = set(t, "controller.watchNamespace=apps")
	mwc = convert[admissionv1.MutatingWebhookConfiguration](t, r.Find("MutatingWebhookConfiguration", controllerName))
	if got := mwc.Webhooks[0].NamespaceSelector.MatchLabels; got["kubernetes.io/metadata.name"] != "apps" || got["probed.io/readiness-gate-inject"] != "enabled" {
		t.Errorf("namespaceSelector %v", got)
	}

	r = set(t, "controller.webhook.enabled=false")
	_, controller = pods(t, r)
	if r.Find("MutatingWebhookConfiguration", controllerName) != nil || r.Find("Secret", "probed-kube-webhook-tls") != nil {
		t.Error("webhook disabled, and still its configuration or Secret")
	}
	if slices.ContainsFunc(controller.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--webhook") }) {
		t.Errorf("webhook disabled, and still its flags: %v", controller.Spec.Containers[0].Args)
	}
}

// TestNetworkPolicy: probed's API admits the controller and the other
// replicas, /metrics the peers given; the webhook anyone.
func TestNetworkPolicy(t *testing.T) {
	if r := render(t); len(r.Kind("NetworkPolicy")) != 0 {
		t.Error("a NetworkPolicy by default")
	}
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := writeFile(file, `
networkPolicy:
  enabled: true
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
  apiFrom: [{podSelector: {matchLabels: {app: ops-console}}}]
`); err != nil {
		t.Fatal(err)
	}
	r := render(t, "-f", file)
	probed, controller := pods(t, r)
	np := convert[networkingv1.NetworkPolicy](t, r.Find("NetworkPolicy", probedName))
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if probed.Labels[k] != v {
			t.Errorf("probed's policy selects %s=%s", k, v)
		}
	}
	peers := map[string][]networkingv1.NetworkPolicyPeer{} // by port name
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			peers[p.Port.String()] = append(peers[p.Port.String()], rule.From...)
		}
	}
	selects := func(peers []networkingv1.NetworkPolicyPeer, labels map[string]string) bool {
		return slices.ContainsFunc(peers, func(p networkingv1.NetworkPolicyPeer) bool {
			if p.PodSelector == nil || p.NamespaceSelector != nil {
				return false
			}
			for k, v := range p.PodSelector.MatchLabels {
				if labels[k] != v {
					return false
				}
			}
			return true
		})
	}
	if !selects(peers["grpc"], controller.Labels) || !selects(peers["grpc"], probed.Labels) || !selects(peers["grpc"], map[string]string{"app": "ops-console"}) {
		t.Errorf("the API admits %+v", peers["grpc"])
	}
	if len(peers["metrics"]) != 1 || peers["metrics"][0].NamespaceSelector == nil {
		t.Errorf("/metrics admits %+v", peers["metrics"])
	}
	np = convert[networkingv1.NetworkPolicy](t, r.Find("NetworkPolicy", controllerName))
	open := false
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port.String() == "webhook" && len(rule.From) == 0 {
				open = true
			}
			if p.Port.String() == "health" && len(rule.From) != 1 {
				t.Errorf("the controller's /metrics admits %+v", rule.From)
			}
		}
	}
	if !open {
		t.Errorf("the webhook port is not open to the API server: %+v", np.Spec.Ingress)
	}
}

func writeFile(path, data string) error { return os.WriteFile(path, []byte(data), 0o600) }
