package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/internal/fullfs"
	"github.com/probed/probed/internal/poll"
	probev1 "github.com/probed/probed/proto/probe/v1"
	probedtel "github.com/probed/probed/telemetry"
)

// TestServeOnAFullDisk: a bbolt store on a full filesystem (a real
// tmpfs) does not stop probed. Creates and deletes are refused with
// Unavailable naming the data dir and "no space", grpc.health.v1 says
// NOT_SERVING and probed_store_unavailable_total counts, while probes go
// on running and a transition that cannot be written stays unpublished.
// Once space is freed probed recovers by itself: SERVING, the held
// transition published, creates accepted; and after a restart every
// acknowledged target is there.
func TestServeOnAFullDisk(t *testing.T) {
	fs := fullfs.Mount(t, 4<<20)
	var failing atomic.Bool
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer backend.Close()
	_, portStr, _ := net.SplitHostPort(backend.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	dataDir := filepath.Join(fs.Dir, "data")
	cfg := testConfig(t, "--data-dir", dataDir)
	metricsAddr := make(chan net.Addr, 2)
	cfg.telemetry.listening = func(a net.Addr) { metricsAddr <- a }
	srv := runServer(t, cfg)
	maddr := (<-metricsAddr).String()
	c, health := dialProbed(t, srv.addr)

	ctx := t.Context()
	minus900, one := int32(-900), int32(1)
	watched := &probev1.Target{Name: "watched", ReadinessProbe: &probev1.Probe{
		Handler:            &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "127.0.0.1", Port: int32(port), Path: "/"}},
		PeriodSeconds:      1,
		PeriodMilliseconds: &minus900,
		FailureThreshold:   one,
	}}
	if _, err := c.CreateTarget(ctx, &probev1.CreateTargetRequest{Target: watched}); err != nil {
		t.Fatal(err)
	}
	waitReadiness(t, c, "watched", probev1.Result_RESULT_SUCCESS)
	acked := map[string]bool{"watched": true}
	create := func(name string) error {
		labels := map[string]string{}
		for i := range 60 {
			labels[fmt.Sprintf("padding-%02d", i)] = strings.Repeat("x", 63)
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := c.CreateTarget(cctx, &probev1.CreateTargetRequest{Target: &probev1.Target{Name: name, Labels: labels}})
		if err == nil {
			acked[name] = true
		}
		return err
	}
	for i := range 10 {
		if err := create(fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}

	fs.Fill(t)
	var refused error
	for i := 0; i < 1000 && refused == nil; i++ {
		err := create(fmt.Sprintf("full-%d", i))
		switch status.Code(err) {
		case codes.OK:
		case codes.DeadlineExceeded:
			// Caught in the transaction that failed: held, written
			// once space returns (not acknowledged).
		case codes.Unavailable:
			refused = err
		default:
			t.Fatalf("create on a full disk: %v", err)
		}
	}
	if refused == nil {
		t.Fatal("1000 creates on a full disk: none refused")
	}
	t.Logf("create on a full disk: %v", refused)
	if cause := "no space left on the device of the data dir " + dataDir; !strings.HasPrefix(status.Convert(refused).Message(), cause) {
		t.Errorf("create on a full disk = %v, want a message starting with its cause, %q", refused, cause)
	}
	if _, err := c.DeleteTarget(ctx, &probev1.DeleteTargetRequest{Name: "before-0"}); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "no space") {
		t.Errorf("delete on a full disk = %v, want Unavailable saying no space", err)
	}
	// Health is told once the write failed, beside the refusals: it may
	// follow them by a moment.
	poll.Until(t, "health NOT_SERVING on a full disk", 20*time.Second, func() bool {
		return servingStatus(t, health) == healthpb.HealthCheckResponse_NOT_SERVING
	})
	if got := scrapeMetric(t, maddr, probedtel.MetricStoreUnavailable); got < 1 {
		t.Errorf("%s = %v on a full disk, want at least 1", probedtel.MetricStoreUnavailable, got)
	}

	// Probing goes on; the transition it finds cannot be written and is
	// not published.
	failing.Store(true)
	before := probesTotal(t, c, "watched")
	poll.UntilMet(t, "watched probed 5 times", 20*time.Second, func() string {
		if n := probesTotal(t, c, "watched"); n < before+5 {
			return fmt.Sprintf("watched probed %d times in 20s on a full disk, want 5", n-before)
		}
		return ""
	})
	if got := readiness(t, c, "watched"); got != probev1.Result_RESULT_SUCCESS {
		t.Errorf("readiness published on a full disk = %v, want SUCCESS (the failure is not durable)", got)
	}
	if probed := scrapeMetric(t, maddr, probedtel.MetricStoreUnavailable); probed < 2 {
		t.Errorf("%s = %v after a held transition, want the retries counted", probedtel.MetricStoreUnavailable, probed)
	}

	fs.Free(t)
	poll.Until(t, "health SERVING after space was freed", 20*time.Second, func() bool {
		return servingStatus(t, health) == healthpb.HealthCheckResponse_SERVING
	})
	waitReadiness(t, c, "watched", probev1.Result_RESULT_FAILURE)
	if err := create("after-0"); err != nil {
		t.Fatalf("create after space was freed: %v", err)
	}

	if err := srv.stop(); err != nil {
		t.Fatalf("serve after recovering from a full disk: %v", err)
	}
	srv = runServer(t, cfg)
	<-metricsAddr
	c, _ = dialProbed(t, srv.addr)
	resp, err := c.ListTargets(ctx, &probev1.ListTargetsRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, tg := range resp.GetTargets() {
		listed[tg.GetName()] = true
	}
	for name := range acked {
		if !listed[name] {
			t.Errorf("acknowledged target %s lost after the full disk and a restart", name)
		}
	}
	if got := readiness(t, c, "watched"); got != probev1.Result_RESULT_FAILURE {
		t.Errorf("readiness after a restart = %v, want FAILURE", got)
	}
}

// runningServer is a serve running until stop.
type runningServer struct {
	addr string
	stop func() error
}

// runServer runs serve with cfg until stop is called or the test ends.
func runServer(t *testing.T, cfg *config) *runningServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, func(a net.Addr) { addr <- a }) }()
	var stopped atomic.Bool
	var serveErr error
	stop := func() error {
		if stopped.CompareAndSwap(false, true) {
			cancel()
			serveErr = <-done
		}
		return serveErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case a := <-addr:
		return &runningServer{addr: a.String(), stop: stop}
	case err := <-done:
		stopped.Store(true)
		t.Fatalf("serve returned before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not start within 30s")
	}
	return nil
}

func dialProbed(t *testing.T, addr string) (probev1.ProbeServiceClient, healthpb.HealthClient) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return probev1.NewProbeServiceClient(conn), healthpb.NewHealthClient(conn)
}

// servingStatus is the server's ("") health status, UNKNOWN when
// probe.v1.ProbeService's differs (read while the status changed; a
// caller that waits for a status sees both agree in the end).
func servingStatus(t *testing.T, h healthpb.HealthClient) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	resp, err := h.Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("health check: %v", err)
	}
	svc, err := h.Check(t.Context(), &healthpb.HealthCheckRequest{Service: probev1.ProbeService_ServiceDesc.ServiceName})
	if err != nil {
		t.Fatalf("health check of %s: %v", probev1.ProbeService_ServiceDesc.ServiceName, err)
	}
	if svc.GetStatus() != resp.GetStatus() {
		// Read while the status changed (each name is set in turn).
		t.Logf("health: server %v, %s %v", resp.GetStatus(), probev1.ProbeService_ServiceDesc.ServiceName, svc.GetStatus())
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return resp.GetStatus()
}

func getTarget(t *testing.T, c probev1.ProbeServiceClient, name string) *probev1.Target {
	t.Helper()
	resp, err := c.GetTarget(t.Context(), &probev1.GetTargetRequest{Name: name})
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return resp.GetTarget()
}

func readiness(t *testing.T, c probev1.ProbeServiceClient, name string) probev1.Result {
	t.Helper()
	return getTarget(t, c, name).GetStatus().GetReadiness().GetResult()
}

func probesTotal(t *testing.T, c probev1.ProbeServiceClient, name string) uint64 {
	t.Helper()
	return getTarget(t, c, name).GetStatus().GetReadiness().GetProbesTotal()
}

func waitReadiness(t *testing.T, c probev1.ProbeServiceClient, name string, want probev1.Result) {
	t.Helper()
	poll.UntilMet(t, name+" readiness "+want.String(), 20*time.Second, func() string {
		if got := readiness(t, c, name); got != want {
			return fmt.Sprintf("%s readiness = %v after 20s, want %v", name, got, want)
		}
		return ""
	})
}

// scrapeMetric reads a counter or gauge without labels from the metrics
// endpoint at addr.
func scrapeMetric(t *testing.T, addr, name string) float64 {
	t.Helper()
	for line := range strings.Lines(metricsText(t, addr)) {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %q: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("no metric %s at %s", name, addr)
	return 0
}

// metricsText is the text exposition of the metrics endpoint at addr.
func metricsText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + metricsPath)
	if err != nil {
		t.Fatalf("metrics of %s: %v", addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("metrics of %s: %v", addr, err)
	}
	return string(body)
}
