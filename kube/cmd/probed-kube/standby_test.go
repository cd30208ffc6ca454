package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/testpki"
	"github.com/probed/probed/kube/internal/controlplane"
	"github.com/probed/probed/kube/internal/kubetest"
	"github.com/probed/probed/kube/podtarget"
)

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestStandbyServesWebhookAndCache: a replica that does not lead (another
// holds the Lease) serves the admission webhook and keeps its pod cache
// synced, so a failover is not a cold LIST and no pod created meanwhile
// misses its gate.
func TestStandbyServesWebhookAndCache(t *testing.T) {
	env := kubetest.Get(t)
	ctx := t.Context()
	ns := env.Namespace(t, "standby", nil)
	// Another replica holds the Lease for an hour.
	holder, duration := "the-leader", int32(3600)
	now := metav1.NewMicroTime(time.Now())
	if _, err := env.Admin.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "probed-kube", Namespace: ns},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probed := probedtest.Start(t, probedtest.Options{})
	kubeconfig, err := env.Plane.Kubeconfig(controlplane.Admin)
	if err != nil {
		t.Fatal(err)
	}
	ca := testpki.NewCA(t, "ca")
	certFile, keyFile := ca.Server(t, "webhook").Write(t, t.TempDir(), "webhook")
	healthAddr, webhookAddr := freeAddr(t), freeAddr(t)
	runCtx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{b: &bytes.Buffer{}}
	code := make(chan int, 1)
	go func() {
		code <- run(runCtx, []string{
			"--kubeconfig", kubeconfig, "--addr", probed.Addr, "--namespace", ns,
			"--lease-namespace", ns, "--identity", "standby", "--health-addr", healthAddr,
			"--webhook-addr", webhookAddr, "--webhook-cert-file", certFile, "--webhook-key-file", keyFile,
			"--log-format", "json",
		}, out, out)
	}()
	t.Cleanup(func() {
		cancel()
		if c := <-code; c != 0 {
			t.Errorf("exit %d; output:\n%s", c, out.String())
		}
	})

	metrics := func() string {
		resp, err := http.Get("http://" + healthAddr + "/metrics")
		if err != nil {
			return ""
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	poll.UntilMet(t, "the standby's pod cache synced", 30*time.Second, func() string {
		m := metrics()
		if strings.Contains(m, "probed_kube_pod_cache_synced 1") && strings.Contains(m, "probed_kube_leader 0") {
			return ""
		}
		return "the standby's /metrics do not show its pod cache synced while not leading; output:\n" + out.String()
	})
	for _, name := range []string{"workqueue_adds_total", "rest_client_requests_total", "process_cpu_seconds_total"} {
		if !strings.Contains(metrics(), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}

	// The webhook answers on the standby.
	pod, _ := json.Marshal(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{podtarget.ProbesAnnotation: "{}"}}})
	body, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Create,
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Object: runtime.RawExtension{Raw: pod}},
	})
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	var review admissionv1.AdmissionReview
	poll.UntilMet(t, "the standby's webhook answers", 30*time.Second, func() string {
		resp, err := hc.Post("https://"+webhookAddr+webhookPath, "application/json", bytes.NewReader(body))
		if err != nil {
			return err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		if err := json.NewDecoder(resp.Body).Decode(&review); err != nil {
			return err.Error()
		}
		return ""
	})
	if review.Response == nil || !review.Response.Allowed || len(review.Response.Patch) == 0 {
		t.Errorf("review response %+v; want the gate added", review.Response)
	}
	// One log format: every line JSON, client-go's included (its leader
	// election logs through klog).
	// (The elector logs it from its own goroutine: it may come after the
	// cache synced and the webhook answered.)
	poll.UntilMet(t, "client-go's klog lines in probed-kube's log", 30*time.Second, func() string {
		if strings.Contains(out.String(), "Attempting to acquire leader lease") {
			return ""
		}
		return "not in:\n" + out.String()
	})
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("a log line is not JSON: %s", line)
		}
	}
}
