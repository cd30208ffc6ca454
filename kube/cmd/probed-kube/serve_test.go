package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/kube/internal/controlplane"
	"github.com/probed/probed/kube/internal/kubelet"
	"github.com/probed/probed/kube/internal/kubetest"
	"github.com/probed/probed/kube/podtarget"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, kubetest.WithHelm())) }

// TestServe runs probed-kube as its command line does, against the real
// control plane and a real probed: a pod that opts in turns ready.
func TestServe(t *testing.T) {
	env := kubetest.Get(t)
	ctx := t.Context()
	ns := env.Namespace(t, "serve", nil)
	kl, err := kubelet.Start(ctx, env.Admin, "node-"+ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kl.Stop)
	probed := probedtest.Start(t, probedtest.Options{Engine: engine.Options{MinPeriod: 10 * time.Millisecond}})
	kubeconfig, err := env.Plane.Kubeconfig(controlplane.Admin)
	if err != nil {
		t.Fatal(err)
	}

	// The pod's server: accepts connections on the pod IP.
	ip := kubetest.PodIP(60000)
	lis, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(lis) })
	t.Cleanup(func() { _ = srv.Close(); wg.Wait() })

	health, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	healthAddr := health.Addr().String()
	_ = health.Close()
	runCtx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{b: &bytes.Buffer{}}
	code := make(chan int, 1)
	go func() {
		code <- run(runCtx, []string{
			"--kubeconfig", kubeconfig, "--addr", probed.Addr, "--namespace", ns,
			"--lease-namespace", ns, "--identity", "test", "--health-addr", healthAddr,
			"--retry-period", "100ms", "--renew-deadline", "1s", "--lease-duration", "2s",
		}, out, out)
	}()

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Annotations: map[string]string{
			podtarget.ProbesAnnotation: `{"readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 1, "periodMilliseconds": -900}}`,
		}},
		Spec: corev1.PodSpec{
			NodeName:       kl.Node(),
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: podtarget.GateType}},
			Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(lis.Addr().(*net.TCPAddr).Port)}}}},
		},
	}
	created, err := env.Admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kl.Run(ctx, created, ip); err != nil {
		t.Fatal(err)
	}
	poll.UntilMet(t, "pod web ready", 30*time.Second, func() string {
		p, err := env.Admin.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return ""
			}
		}
		return "pod not ready through probed-kube within 30 s; its output:\n" + out.String()
	})
	resp, err := http.Get("http://" + healthAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz: %s", resp.Status)
	}
	cancel()
	if c := <-code; c != 0 {
		t.Errorf("exit %d after SIGTERM; output:\n%s", c, out.String())
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
