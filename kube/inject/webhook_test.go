package inject_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/testpki"
	"github.com/probed/probed/kube/inject"
	"github.com/probed/probed/kube/internal/kubetest"
	"github.com/probed/probed/kube/podtarget"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// Configuration returns the MutatingWebhookConfiguration the chart must
// render (README, "Gate injection"), calling url with caBundle.
func configuration(url string, caBundle []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	never := admissionregistrationv1.NeverReinvocationPolicy
	equivalent := admissionregistrationv1.Equivalent
	timeout := int32(5)
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "probed-kube"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "readiness-gate.probed.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
					Scope: ptr(admissionregistrationv1.NamespacedScope),
				},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{podtarget.InjectLabel: "enabled"}},
			ObjectSelector:          &metav1.LabelSelector{},
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          &timeout,
			ReinvocationPolicy:      &never,
			MatchPolicy:             &equivalent,
		}},
	}
}

func ptr[T any](v T) *T { return &v }

// TestWebhookInjectsGate: the real kube-apiserver calls the webhook (at
// 127.0.0.1, its certificate from the test's CA): a pod created with the
// annotation in a labelled namespace gets the gate, once; nothing else
// changes; other pods and other namespaces are left alone.
func TestWebhookInjectsGate(t *testing.T) {
	env := kubetest.Get(t)
	ctx := t.Context()
	ca := testpki.NewCA(t, "webhook-ca")
	certFile, keyFile := ca.Server(t, "webhook").Write(t, t.TempDir(), "webhook")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cert, err := inject.NewCertificate(certFile, keyFile, log)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srvCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := inject.Serve(srvCtx, lis, cert, log); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	t.Cleanup(func() { stop(); wg.Wait() })

	cfg := configuration("https://"+lis.Addr().String()+inject.Path, ca.PEM)
	if _, err := env.Admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
	})
	// The namespaces by their role: "inject" labelled for injection,
	// "plain" not.
	namespaces := map[string]string{
		"inject": env.Namespace(t, "inject", map[string]string{podtarget.InjectLabel: "enabled"}),
		"plain":  env.Namespace(t, "plain", nil),
	}
	newPod := func(name string, annotated bool, gates ...string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app"}}},
		}
		if annotated {
			p.Annotations = map[string]string{podtarget.ProbesAnnotation: `{"readinessProbe": {"tcpSocket": {"port": 80}}}`}
		}
		for _, g := range gates {
			p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: corev1.PodConditionType(g)})
		}
		return p
	}
	create := func(t *testing.T, ns string, p *corev1.Pod, dryRun bool) *corev1.Pod { // ns: a role of namespaces
		t.Helper()
		opts := metav1.CreateOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		got, err := env.Admin.CoreV1().Pods(namespaces[ns]).Create(ctx, p, opts)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	gates := func(p *corev1.Pod) []string {
		var out []string
		for _, g := range p.Spec.ReadinessGates {
			out = append(out, string(g.ConditionType))
		}
		return out
	}
	// The API server picks the configuration up from its own cache: dry
	// runs (the webhook has no side effects) until it does.
	poll.Until(t, "the API server calls the webhook", 30*time.Second, func() bool {
		return slices.Contains(gates(create(t, "inject", newPod("probe", true), true)), podtarget.GateType)
	})

	tests := []struct {
		name      string
		ns        string
		annotated bool
		gates     []string
		want      []string
	}{
		{name: "annotated", ns: "inject", annotated: true, want: []string{podtarget.GateType}},
		{name: "another gate", ns: "inject", annotated: true, gates: []string{"other.io/ready"}, want: []string{"other.io/ready", podtarget.GateType}},
		{name: "gated already", ns: "inject", annotated: true, gates: []string{podtarget.GateType}, want: []string{podtarget.GateType}},
		{name: "not annotated", ns: "inject"},
		{name: "namespace not labelled", ns: "plain", annotated: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod("web-"+string(rune('a'+i)), tt.annotated, tt.gates...)
			got := create(t, tt.ns, p, false)
			if !slices.Equal(gates(got), tt.want) {
				t.Errorf("gates %v; want %v", gates(got), tt.want)
			}
			// Nothing else changed: the same pod, dry run in the plain
			// namespace, with the gates we got.
			plain := newPod("ref-"+p.Name, tt.annotated, gates(got)...)
			ref := create(t, "plain", plain, true)
			if !equalSpecs(got, ref) {
				t.Errorf("the webhook changed more than the gates:\n%+v\n%+v", got.Spec, ref.Spec)
			}
		})
	}
}

// equalSpecs compares what a webhook could change: the spec, labels and
// annotations.
func equalSpecs(a, b *corev1.Pod) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	return equality(a.Spec, b.Spec) && equality(a.Labels, b.Labels) && equality(a.Annotations, b.Annotations)
}

func equality(a, b any) bool { return apiequality.Semantic.DeepEqual(a, b) }
