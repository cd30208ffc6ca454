package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/testpki"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func TestMetricsEndpoint(t *testing.T) {
	var traceparent atomic.Value // string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparent.Store(r.Header.Get("Traceparent"))
	}))
	defer backend.Close()
	cfg := testConfig(t, "--trace-propagate")
	metricsAddr := make(chan net.Addr, 1)
	cfg.telemetry.listening = func(a net.Addr) { metricsAddr <- a }
	addr := startServer(t, cfg)
	maddr := <-metricsAddr

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := probev1.NewProbeServiceClient(conn)
	_, portStr, _ := net.SplitHostPort(backend.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	minus900 := int32(-900)
	_, err = c.CreateTarget(t.Context(), &probev1.CreateTargetRequest{Target: &probev1.Target{
		Name: "web",
		ReadinessProbe: &probev1.Probe{
			Handler:            &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "127.0.0.1", Port: int32(port), Path: "/"}},
			PeriodSeconds:      1,
			PeriodMilliseconds: &minus900,
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	poll.UntilMet(t, "web probed twice", 10*time.Second, func() string {
		resp, err := c.GetTarget(t.Context(), &probev1.GetTargetRequest{Name: "web"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetTarget().GetStatus().GetReadiness().GetProbesTotal() >= 2 {
			return ""
		}
		return fmt.Sprintf("target never probed twice: %v", resp.GetTarget().GetStatus())
	})

	resp, err := http.Get("http://" + maddr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	text := string(body)
	for _, want := range []string{
		`prober_probe_total{probe_type="Readiness",result="successful"} `,
		`prober_probe_duration_seconds_bucket{probe_type="Readiness",result="successful",le="+Inf"} `,
		`probed_transitions_total{from="failure",probe_type="Readiness",to="success"} 1`,
		`probed_readiness_latency_seconds_count 1`,
		`probed_targets{phase="active"} 1`,
		`probed_probes_scheduled 1`,
		`probed_scheduler_lateness_seconds_bucket{le="0.0005"} `,
		`probed_scheduler_skipped_total{reason="overlap"} 0`,
		`probed_http_probe_phase_seconds_count{phase="first_byte"} `,
		`probed_watch_evictions_total 0`,
		`probed_store_commit_seconds_count `,
		`rpc_server_call_duration_seconds_count{`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
	if tp, _ := traceparent.Load().(string); !strings.HasPrefix(tp, "00-") {
		t.Errorf("the backend saw traceparent %q, want a W3C one (--trace-propagate)", tp)
	}
}

// TestMetricsListenerProtected checks that /metrics and, with --pprof, the
// profiles are served as the API is: over TLS with the API's certificate,
// and only with a credential.
func TestMetricsListenerProtected(t *testing.T) {
	p := newPKI(t)
	cfg := testConfig(t, p.tlsArgs("--pprof", "--auth-token-file", tokenFile(t, aliceToken+" alice"))...)
	metricsAddr := make(chan net.Addr, 1)
	cfg.telemetry.listening = func(a net.Addr) { metricsAddr <- a }
	startServer(t, cfg)
	base := "https://" + (<-metricsAddr).String()

	caPEM, err := os.ReadFile(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer hc.CloseIdleConnections()
	tests := []struct{ path, want string }{
		{path: "/metrics", want: "probed_targets"},
		{path: "/debug/pprof/", want: "goroutine"},
		{path: "/debug/pprof/heap?debug=1", want: "heap profile:"},
		{path: "/debug/pprof/cmdline", want: "probed"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if code, _ := getWithToken(t, hc, base+tt.path, ""); code != http.StatusUnauthorized {
				t.Errorf("without a token: %d, want 401", code)
			}
			if code, _ := getWithToken(t, hc, base+tt.path, bobToken); code != http.StatusUnauthorized {
				t.Errorf("with an unknown token: %d, want 401", code)
			}
			code, body := getWithToken(t, hc, base+tt.path, aliceToken)
			if code != http.StatusOK || !strings.Contains(body, tt.want) {
				t.Errorf("with a token: %d, want 200 with %q:\n%.2000s", code, tt.want, body)
			}
		})
	}
}

// getWithToken GETs url with hc, with a bearer token unless it is "", and
// returns the status code and the body.
func getWithToken(t *testing.T, hc *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// TestMetricsVerb: under --authz-policy, /metrics and the profiles are
// for identities granted the metrics verb alone (403 for the others,
// whatever else they may do), and an identity granted only metrics gets
// nothing else: no status page, no replicas, no write, no target.
func TestMetricsVerb(t *testing.T) {
	const promToken = "prometheus-0123456789ab"
	policy := testpki.WriteFile(t, t.TempDir(), "policy.yaml", []byte(`rules:
  - {identities: [alice], names: [""], verbs: [read, write, operate]}
  - {identities: [prometheus], names: [""], verbs: [metrics]}
`))
	cfg := testConfig(t, "--pprof", "--ui-addr", "127.0.0.1:0", "--auth-token-file", tokenFile(t, aliceToken+" alice", promToken+" prometheus"),
		"--authz-policy", policy)
	metricsAddr, uiAddr := make(chan net.Addr, 1), make(chan net.Addr, 1)
	cfg.telemetry.listening = func(a net.Addr) { metricsAddr <- a }
	cfg.ui.listening = func(a net.Addr) { uiAddr <- a }
	addr := startServer(t, cfg)
	metrics, page := "http://"+(<-metricsAddr).String(), "http://"+(<-uiAddr).String()
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	tests := []struct {
		url, token string
		want       int
	}{
		{metrics + "/metrics", promToken, http.StatusOK},
		{metrics + "/debug/pprof/heap?debug=1", promToken, http.StatusOK},
		{metrics + "/metrics", aliceToken, http.StatusForbidden},
		{metrics + "/debug/pprof/heap?debug=1", aliceToken, http.StatusForbidden},
		{metrics + "/metrics", "", http.StatusUnauthorized},
		{page + "/", aliceToken, http.StatusOK},
		{page + "/", promToken, http.StatusForbidden},
	}
	for _, tt := range tests {
		if code, body := getWithToken(t, hc, tt.url, tt.token); code != tt.want {
			t.Errorf("GET %s with %.10q: %d, want %d\n%.300s", tt.url, tt.token, code, tt.want, body)
		}
	}

	alice := dialClient(t, addr, client.WithToken(aliceToken))
	if _, err := alice.Create(t.Context(), &probev1.Target{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	prom := dialClient(t, addr, client.WithToken(promToken))
	if _, err := prom.Create(t.Context(), &probev1.Target{Name: "other"}); !errors.Is(err, client.ErrPermissionDenied) {
		t.Errorf("CreateTarget as prometheus = %v, want PermissionDenied", err)
	}
	if _, err := prom.Get(t.Context(), "web"); !errors.Is(err, client.ErrPermissionDenied) {
		t.Errorf("GetTarget as prometheus = %v, want PermissionDenied", err)
	}
	if ts, err := prom.ListAll(t.Context(), nil); err != nil || len(ts) > 0 {
		t.Errorf("ListTargets as prometheus = %v (%v), want none", ts, err)
	}
	if _, err := prom.Replicas(t.Context()); !errors.Is(err, client.ErrPermissionDenied) {
		t.Errorf("ListReplicas as prometheus = %v, want PermissionDenied", err)
	}
}
