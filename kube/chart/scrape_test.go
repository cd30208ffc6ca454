package chart_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/yaml"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/probedproc"
	"github.com/probed/probed/internal/procs"
	"github.com/probed/probed/kube/internal/kubetest"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestPrometheusScrapesProbed runs probed with the chart's flags, files
// and policy at a pod IP, and scrapes it as Prometheus does with the
// chart's ServiceMonitor: https to the pod IP, the CA and server name of
// its tlsConfig, the token its authorization names. That identity may
// scrape and nothing else; the controller's token may manage targets and
// not scrape; a scraper that verifies the pod IP instead of the server
// name fails (no certificate names pod IPs).
func TestPrometheusScrapesProbed(t *testing.T) {
	kubetest.Get(t) // the pod range of the namespace
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin, err := probedproc.Build(ctx, dir, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	r := set(t, "serviceMonitor.enabled=true")
	pod, err := r.PodSpec("StatefulSet", probedName)
	if err != nil {
		t.Fatal(err)
	}
	ip := kubetest.PodIP(50000)
	local, err := r.Prepare(pod, "probed", dir, map[string]string{"POD_NAME": "probed-0"}, nil, map[string]string{
		"--addr": net.JoinHostPort(ip, "50051"), "--metrics-addr": net.JoinHostPort(ip, "9464"), "--data-dir": dir + "/data",
	})
	if err != nil {
		t.Fatal(err)
	}
	serving := probedproc.NewServing()
	var log lockedLog
	cmd := exec.Command(bin, local.Args...)
	cmd.Stderr = io.MultiWriter(&log, serving)
	c, err := procs.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(30 * time.Second) })
	select {
	case <-serving.Done():
	case <-c.Exited():
		if strings.Contains(log.String(), `unknown verb "metrics"`) {
			t.Fatalf("probed refuses the chart's policy: it lacks the authorization verb metrics (issue 31, the srvhard branch):\n%s", log.String())
		}
		t.Fatalf("probed with the chart's flags %v exited: %v\n%s", local.Args, c.Err(), log.String())
	case <-ctx.Done():
		t.Fatalf("probed did not serve:\n%s", log.String())
	}

	obj := r.Find("ServiceMonitor", probedName)
	data, _ := obj.MarshalJSON()
	var sm monitoringv1.ServiceMonitor
	if err := yaml.Unmarshal(data, &sm); err != nil {
		t.Fatal(err)
	}
	ep := sm.Spec.Endpoints[0]
	caSecret, err := r.SecretData(ep.TLSConfig.CA.Secret.Name)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caSecret[ep.TLSConfig.CA.Secret.Key])
	tokens, err := r.SecretData(ep.Authorization.Credentials.Name)
	if err != nil {
		t.Fatal(err)
	}
	url := string(*ep.Scheme) + "://" + net.JoinHostPort(ip, "9464") + ep.Path // the pod's metrics container port
	scrape := func(serverName, token string) (int, string, error) {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12},
		}}
		defer hc.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	serverName := *ep.TLSConfig.ServerName
	promToken := string(tokens[ep.Authorization.Credentials.Key])
	controllerToken := string(tokens["token"])
	tests := []struct {
		name, serverName, token string
		want                    int
	}{
		{name: "prometheus", serverName: serverName, token: promToken, want: http.StatusOK},
		{name: "the controller's token", serverName: serverName, token: controllerToken, want: http.StatusForbidden},
		{name: "no token", serverName: serverName, want: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		code, body, err := scrape(tt.serverName, tt.token)
		if err != nil || code != tt.want {
			t.Errorf("%s: scrape %s: %d, %v; want %d\n%.300s", tt.name, url, code, err, tt.want, body)
		}
		if tt.want == http.StatusOK && !strings.Contains(body, "probed_") {
			t.Errorf("%s: no probed metric in:\n%.300s", tt.name, body)
		}
	}
	var verr *tls.CertificateVerificationError
	if _, _, err := scrape(ip, promToken); !errors.As(err, &verr) {
		t.Errorf("a scrape that verifies the pod IP: %v; want a certificate verification error", err)
	}

	// The API: the controller's identity manages targets, Prometheus' not.
	caFile := local.Files["/etc/probed/tls/ca.crt"]
	for _, id := range []struct {
		name, token string
		want        codes.Code
	}{{"probed-kube", controllerToken, codes.OK}, {"prometheus", promToken, codes.PermissionDenied}} {
		pc, err := client.Dial(ctx, net.JoinHostPort(ip, "50051"), client.WithTLS(caFile), client.WithToken(id.token),
			client.WithDialOptions(grpc.WithAuthority(serverName)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = pc.Create(ctx, &probev1.Target{Name: "apps/web-" + id.name})
		_ = pc.Close()
		if got := status.Code(err); got != id.want {
			t.Errorf("%s creates a target: %v; want %s", id.name, err, id.want)
		}
	}
}

type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
