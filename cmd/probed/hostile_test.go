package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/client"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/refused"
	"github.com/probed/probed/internal/testpki"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// The tests in this file are issue 14's attacks, replayed over the real
// API against a real probed: hostile probe targets on loopback, and
// hostile clients. Each says what the attack did before.

// fastProbe probes every 100 ms (the default floor) with a 100 ms timeout
// and threshold 1.
func fastProbe() *probev1.Probe {
	return &probev1.Probe{PeriodSeconds: 1, PeriodMilliseconds: ptr[int32](-900), TimeoutMilliseconds: ptr[int32](-900), FailureThreshold: 1}
}

func ptr[T any](v T) *T { return &v }

func hostAndPort(t *testing.T, addr string) (string, int32) {
	t.Helper()
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return h, port(t, addr)
}

// waitTarget polls Get until cond holds (10 s at most).
func waitTarget(t *testing.T, c *client.Client, name string, cond func(*probev1.Target) bool) *probev1.Target {
	t.Helper()
	var last *probev1.Target
	eventually(t, "target "+name, func() bool {
		tg, err := c.Get(callCtx(t), name)
		if err != nil {
			t.Fatalf("Get(%s): %v", name, err)
		}
		last = tg
		return cond(tg)
	})
	return last
}

func probesRun(typ func(*probev1.TargetStatus) *probev1.ProbeStatus, n uint64) func(*probev1.Target) bool {
	return func(tg *probev1.Target) bool { return typ(tg.GetStatus()).GetProbesTotal() >= n }
}

// TestHostileMessagesAreBounded: a gRPC health server answering with an
// 8 MiB error message made GetTarget and ListTargets fail with
// ResourceExhausted (over gRPC's 4 MiB), broke every Watch from an older
// revision, and was stored (and logged) whole. Every message is now at
// most probe.MaxMessageBytes where it enters probed, and the store grows
// by what probed keeps, not by what a target sends.
func TestHostileMessagesAreBounded(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	addr := startServer(t, cfg)
	c := dialClient(t, addr)
	db := filepath.Join(cfg.dataDir, "probed.db")
	before := fileSize(t, db)

	grpcHost, grpcPort := hostAndPort(t, probedtest.FailingHealthServer(t, strings.Repeat("m", 8<<20)))
	httpHost, httpPort := hostAndPort(t, probedtest.HeaderServer(t, "HTTP/1.1 300 "+strings.Repeat("r", 12<<10), func(int) string { return "" }))
	liveness := fastProbe()
	liveness.Handler = &probev1.Probe_Grpc{Grpc: &probev1.GRPCAction{Host: grpcHost, Port: grpcPort}}
	readiness := fastProbe()
	readiness.Handler = &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: httpHost, Port: httpPort}}
	if _, err := c.Create(callCtx(t), &probev1.Target{Name: "hostile", LivenessProbe: liveness, ReadinessProbe: readiness}); err != nil {
		t.Fatal(err)
	}
	tg := waitTarget(t, c, "hostile", func(tg *probev1.Target) bool {
		st := tg.GetStatus()
		return !st.GetLive() && st.GetReady() && st.GetLiveness().GetProbesTotal() >= 10 && st.GetReadiness().GetProbesTotal() >= 10
	})
	for _, ps := range []*probev1.ProbeStatus{tg.GetStatus().GetLiveness(), tg.GetStatus().GetReadiness()} {
		if m := ps.GetLastMessage(); m == "" || len(m) > probe.MaxMessageBytes {
			t.Errorf("last message of %d bytes, want 1 to %d", len(m), probe.MaxMessageBytes)
		}
	}
	if _, err := c.ListAll(callCtx(t), nil); err != nil {
		t.Errorf("ListTargets: %v", err)
	}
	// A watch from the start replays both transitions.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	seen := 0
	for r := range c.Watch(ctx, client.WithSince(1)) {
		if r.Err != nil {
			t.Fatalf("Watch from revision 1: %v", r.Err)
		}
		for _, ev := range r.Events {
			if len(ev.GetMessage()) > probe.MaxMessageBytes {
				t.Errorf("event %d: a message of %d bytes", ev.GetRevision(), len(ev.GetMessage()))
			}
			if ev.GetKind() == probev1.EventKind_EVENT_KIND_TRANSITION {
				seen++
			}
		}
		if seen >= 2 { // a batch may hold more: under -race the 100 ms probes flap
			break
		}
	}
	// Unbounded, the 8 MiB message was stored with its transition.
	if grew := fileSize(t, db) - before; grew > 2<<20 {
		t.Errorf("the store grew by %d bytes", grew)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestHandshakesThatNeverEndHoldNothing: a target that accepts TCP and
// never finishes the TLS handshake (or the HTTP/2 preface) leaked a
// socket and goroutines per probe, until probed ran out of file
// descriptors. Now each probe closes what it opened by its timeout: the
// target sees at most one connection per probe in flight.
func TestHandshakesThatNeverEndHoldNothing(t *testing.T) {
	t.Parallel()
	addr := startServer(t, testConfig(t))
	c := dialClient(t, addr)
	hold := probedtest.NewHolding(t)
	host, p := hostAndPort(t, hold.Addr)
	handlers := map[string]func() *probev1.Probe{
		"https": func() *probev1.Probe {
			pr := fastProbe()
			pr.Handler = &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: host, Port: p, Scheme: probev1.Scheme_SCHEME_HTTPS}}
			return pr
		},
		"grpc-tls": func() *probev1.Probe {
			pr := fastProbe()
			pr.Handler = &probev1.Probe_Grpc{Grpc: &probev1.GRPCAction{Host: host, Port: p, Tls: &probev1.TLSConfig{}}}
			return pr
		},
		"grpc": func() *probev1.Probe {
			pr := fastProbe()
			pr.Handler = &probev1.Probe_Grpc{Grpc: &probev1.GRPCAction{Host: host, Port: p}}
			return pr
		},
	}
	for name, h := range handlers {
		if _, err := c.Create(callCtx(t), &probev1.Target{Name: name, ReadinessProbe: h()}); err != nil {
			t.Fatal(err)
		}
	}
	for name := range handlers {
		waitTarget(t, c, name, probesRun((*probev1.TargetStatus).GetReadiness, 10))
	}
	// Unbounded: about one open connection per probe run so far (30+).
	if open := hold.Open(); open > int64(2*len(handlers)) {
		t.Errorf("%d connections open after 10 probes of each of %d targets; want at most one per probe in flight", open, len(handlers))
	}
	for name := range handlers {
		if _, err := c.Delete(callCtx(t), name); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every connection closed once the targets are deleted", func() bool { return hold.Open() == 0 })
}

// TestEndlessResponseHeadersAreCapped: 20 targets answering with endless
// headers took +200 MB (net/http reads 10 MB of header per response) and
// slowed healthy probes. The header is capped: the probes fail, having
// allocated little. Not parallel: it measures the process's allocations.
func TestEndlessResponseHeadersAreCapped(t *testing.T) {
	addr := startServer(t, testConfig(t))
	c := dialClient(t, addr)
	line := "X-Endless: " + strings.Repeat("a", 1000)
	host, p := hostAndPort(t, probedtest.HeaderServer(t, "HTTP/1.1 200 OK", func(int) string { return line }))
	const targets = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range targets {
		pr := fastProbe()
		pr.Handler = &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: host, Port: p}}
		if _, err := c.Create(callCtx(t), &probev1.Target{Name: "endless-" + strconv.Itoa(i), ReadinessProbe: pr}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range targets {
		tg := waitTarget(t, c, "endless-"+strconv.Itoa(i), probesRun((*probev1.TargetStatus).GetReadiness, 5))
		if tg.GetStatus().GetReady() {
			t.Errorf("a probe of an endless header succeeded: %q", tg.GetStatus().GetReadiness().GetLastMessage())
		}
	}
	runtime.ReadMemStats(&after)
	// Unbounded: 20 targets × 5 probes × 10 MB.
	const limit = 128 << 20
	if got := after.TotalAlloc - before.TotalAlloc; got > limit {
		t.Errorf("%d targets × 5 probes of endless headers allocated %d bytes; want at most %d", targets, got, limit)
	}
}

// TestUnspecifiedAddressesRefused: 0.0.0.0, :: and ::ffff:0.0.0.0 got
// past a deny list of 127.0.0.0/8 and ::1, and reached local servers.
func TestUnspecifiedAddressesRefused(t *testing.T) {
	t.Parallel()
	addr := startServer(t, testConfig(t, "--deny-targets", "127.0.0.0/8,::1"))
	c := dialClient(t, addr)
	for _, host := range []string{"0.0.0.0", "::", "::ffff:0.0.0.0"} {
		_, err := c.Create(callCtx(t), tcpTarget("local", host, port(t, addr)))
		var inv *client.InvalidError
		if !errors.As(err, &inv) || len(inv.Violations) != 1 || inv.Violations[0].Field != "target.readinessProbe.tcpSocket.host" ||
			!strings.Contains(inv.Violations[0].Description, "must not be an unspecified address") {
			t.Errorf("Create with host %q: %v, want a field error on the host", host, err)
		}
	}
}

// TestBadInputIsRefusedAtCreate: inputs that failed on every probe
// afterwards, with no field path, are field errors, all reported at once.
func TestBadInputIsRefusedAtCreate(t *testing.T) {
	t.Parallel()
	addr := startServer(t, testConfig(t, "--allow-exec"))
	c := dialClient(t, addr)
	probeOf := func(h any) *probev1.Probe {
		pr := &probev1.Probe{}
		switch h := h.(type) {
		case *probev1.HTTPGetAction:
			pr.Handler = &probev1.Probe_HttpGet{HttpGet: h}
		case *probev1.TCPSocketAction:
			pr.Handler = &probev1.Probe_TcpSocket{TcpSocket: h}
		case *probev1.ExecAction:
			pr.Handler = &probev1.Probe_Exec{Exec: h}
		}
		return pr
	}
	_, err := c.Create(callCtx(t), &probev1.Target{
		Name:           "bad",
		StartupProbe:   probeOf(&probev1.HTTPGetAction{Host: "127.0.0.1:8080", Port: 80, Path: "/a\r\nX-Injected: 1"}),
		LivenessProbe:  probeOf(&probev1.ExecAction{Command: []string{"true", "a\x00b"}}),
		ReadinessProbe: probeOf(&probev1.HTTPGetAction{Host: "::1%", Port: 80, Path: "/%zz"}),
		Labels:         map[string]string{"ok": "yes"},
	})
	var inv *client.InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("Create: %v, want an InvalidError", err)
	}
	var fields []string
	for _, v := range inv.Violations {
		fields = append(fields, v.Field)
	}
	want := []string{
		"target.startupProbe.httpGet.host", "target.startupProbe.httpGet.path",
		"target.livenessProbe.exec.command[1]",
		"target.readinessProbe.httpGet.host", "target.readinessProbe.httpGet.path",
	}
	if strings.Join(fields, " ") != strings.Join(want, " ") {
		t.Errorf("violations at %v, want %v", fields, want)
	}
	for _, host := range []string{":", "a..b"} {
		if _, err := c.Create(callCtx(t), tcpTarget("bad", host, 80)); !errors.Is(err, client.ErrInvalid) {
			t.Errorf("host %q: %v, want ErrInvalid", host, err)
		}
	}
}

// TestErrorsEchoLittle: a 0.9 MB request made a 3.6 MB error, and a label
// key with terminal escape sequences was printed as is. Errors quote and
// clip what they echo, and report at most 100 problems.
func TestErrorsEchoLittle(t *testing.T) {
	t.Parallel()
	addr := startServer(t, testConfig(t))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	bad := strings.Repeat("\x01", 4000)
	headers := make([]*probev1.HTTPHeader, 32)
	for i := range headers {
		headers[i] = &probev1.HTTPHeader{Name: "X-" + strconv.Itoa(i), Value: bad}
	}
	labels := map[string]string{"\x1b[2J\x1b]0;pwned\a": "v"}
	for i := range 100 {
		labels[fmt.Sprintf("-%d", i)] = "v"
	}
	pr := func() *probev1.Probe {
		return &probev1.Probe{Handler: &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "h", Port: 80, HttpHeaders: headers}}}
	}
	req := &probev1.CreateTargetRequest{Target: &probev1.Target{Name: "big", Labels: labels, StartupProbe: pr(), LivenessProbe: pr(), ReadinessProbe: pr()}}
	_, err = probev1.NewProbeServiceClient(conn).CreateTarget(callCtx(t), req)
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("Create: %v, want InvalidArgument", err)
	}
	size := len(st.Message())
	var violations []*errdetails.BadRequest_FieldViolation
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			violations = br.GetFieldViolations()
		}
	}
	for _, v := range violations {
		size += len(v.GetField()) + len(v.GetDescription())
		if strings.ContainsAny(v.GetField()+v.GetDescription(), "\x1b\x01\a") {
			t.Errorf("violation %q: %q echoes control characters", v.GetField(), v.GetDescription())
		}
	}
	if len(violations) != 100 {
		t.Errorf("%d violations, want the first 99 and one saying how many more", len(violations))
	}
	if size > 64<<10 {
		t.Errorf("the error of a %d-byte request is %d bytes", len(bad)*96, size)
	}
}

// TestSlowWatchersAreBoundedInBytes: watchers that never read held events
// bounded by count only (1,000 watchers × 10,000 events: RSS 29 MB → 630
// MB with 200 of them). Past --watch-total-bytes the slowest are ended,
// naming the bound and the revision to resume from; a watcher that reads
// keeps going.
func TestSlowWatchersAreBoundedInBytes(t *testing.T) {
	t.Parallel()
	addr := startServer(t, testConfig(t, "--watch-total-bytes", strconv.Itoa(256<<10), "--registrations-per-second", "0"))
	c := dialClient(t, addr)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := c.Create(callCtx(t), plainTarget("busy")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Three watchers that read their snapshot, then nothing more.
	var slow []probev1.ProbeService_WatchClient
	for range 3 {
		s, err := probev1.NewProbeServiceClient(conn).Watch(ctx, &probev1.WatchRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := s.Recv(); err != nil || !r.GetSnapshotComplete() {
			t.Fatalf("snapshot: %v %v", r, err)
		}
		slow = append(slow, s)
	}
	reader := c.Watch(ctx)
	// Its snapshot first: an update made before the watch is established
	// would reach it in the snapshot, not as an UPDATED event.
	for snapshot := true; snapshot; {
		select {
		case r := <-reader:
			if r.Err != nil {
				t.Fatalf("the reading watcher: %v", r.Err)
			}
			snapshot = !r.SnapshotComplete
		case <-time.After(10 * time.Second):
			t.Fatal("the reading watcher got no snapshot")
		}
	}
	updated := 0
	read := func(r client.WatchResponse) {
		if r.Err != nil {
			t.Fatalf("the reading watcher: %v", r.Err)
		}
		for _, ev := range r.Events {
			if ev.GetKind() == probev1.EventKind_EVENT_KIND_UPDATED {
				updated++
			}
		}
	}
	const updates = 400
	labels := map[string]string{}
	for i := range 32 {
		labels["label-"+strconv.Itoa(i)] = strings.Repeat("v", 60)
	}
	for i := range updates {
		labels["n"] = strconv.Itoa(i)
		if _, err := c.Update(callCtx(t), &probev1.Target{Name: "busy", Labels: labels}); err != nil {
			t.Fatal(err)
		}
		select { // the reading watcher keeps up
		case r := <-reader:
			read(r)
		default:
		}
	}
	for i, s := range slow {
		var err error
		for err == nil {
			_, err = s.Recv()
		}
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--watch-total-bytes") {
			t.Errorf("slow watcher %d ended with %v, want ResourceExhausted naming --watch-total-bytes", i, err)
		}
	}
	for updated < updates {
		select {
		case r := <-reader:
			read(r)
		case <-time.After(10 * time.Second):
			t.Fatalf("the reading watcher got %d of %d updates", updated, updates)
		}
	}
}

// TestStatusPageAnswersOnlyItsOwnHosts: the status page answered any Host
// (DNS rebinding from a browser reached the specs, probe headers with
// secrets included) and any Origin.
func TestStatusPageAnswersOnlyItsOwnHosts(t *testing.T) {
	t.Parallel()
	ui := refused.Reserve(t).Addr()
	metrics := make(chan net.Addr, 1)
	cfg := testConfig(t, "--ui-addr", ui, "--allowed-hosts", "probed.example")
	cfg.telemetry.listening = func(a net.Addr) { metrics <- a }
	startServer(t, cfg)
	metricsAddr := (<-metrics).String()
	tests := []struct {
		name, url, host, origin string
		want                    int
	}{
		{name: "the page by address", url: "http://" + ui + "/", want: http.StatusOK},
		{name: "the page by localhost", url: "http://" + ui + "/", host: "localhost", want: http.StatusOK},
		{name: "the page by an allowed name", url: "http://" + ui + "/", host: "probed.example:8080", want: http.StatusOK},
		{name: "the page by a rebound name", url: "http://" + ui + "/", host: "attacker.example", want: http.StatusForbidden},
		{name: "a target's spec by a rebound name", url: "http://" + ui + "/api/targets/x", host: "attacker.example:80", want: http.StatusForbidden},
		{name: "the event stream from another site", url: "http://" + ui + "/api/events", origin: "http://attacker.example", want: http.StatusForbidden},
		{name: "metrics by a rebound name", url: "http://" + metricsAddr + "/metrics", host: "attacker.example", want: http.StatusForbidden},
		{name: "metrics by address", url: "http://" + metricsAddr + "/metrics", want: http.StatusOK},
	}
	for _, tt := range tests {
		req, err := http.NewRequestWithContext(callCtx(t), http.MethodGet, tt.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tt.host != "" {
			req.Host = tt.host
		}
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s: %s, want %d", tt.name, resp.Status, tt.want)
		}
	}
}

func TestHTTPListenersOffLoopbackNeedSecurity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "status page on every interface", args: []string{"--ui-addr", "0.0.0.0:8080"}, wantErr: "--ui-addr 0.0.0.0:8080 is not a loopback address"},
		{name: "metrics on every interface", args: []string{"--metrics-addr", ":9464"}, wantErr: "--metrics-addr :9464 is not a loopback address"},
		{name: "status page with --insecure", args: []string{"--ui-addr", "0.0.0.0:8080", "--insecure"}},
		{name: "metrics with tokens", args: []string{"--metrics-addr", "0.0.0.0:9464", "--auth-token-file", "tokens"}},
		{name: "status page on loopback", args: []string{"--ui-addr", "[::1]:8080"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("parseFlags(%v) = %v", tt.args, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "--insecure") {
				t.Fatalf("parseFlags(%v) error = %v, want it to contain %q and name --insecure", tt.args, err, tt.wantErr)
			}
		})
	}
}

// TestRevokedTokenEndsStatusPageStreams: removing a token ended gRPC Watch
// streams opened with it, not the status page's event streams.
func TestRevokedTokenEndsStatusPageStreams(t *testing.T) {
	t.Parallel()
	tokens := tokenFile(t, aliceToken+" alice", bobToken+" bob")
	ui := refused.Reserve(t).Addr()
	startServer(t, testConfig(t, "--ui-addr", ui, "--auth-token-file", tokens, "--reload-interval", "50ms"))
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+ui+"/api/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); err != nil || line != "retry: 1000\n" {
		t.Fatalf("first line of the stream: %q, %v", line, err)
	}
	testpki.WriteFile(t, filepath.Dir(tokens), filepath.Base(tokens), []byte(bobToken+" bob\n"))
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, r)
		ended <- err
	}()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the event stream of a revoked token is still open 10s after the rotation")
	}
}

// TestRaisedFloorsApplyAfterRestart: a target created under --min-period
// 50ms kept probing every 50 ms after a restart with --min-period 200ms.
func TestRaisedFloorsApplyAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, "--data-dir", dir, "--min-period", "50ms", "--min-timeout", "50ms")
	stop, addr := startStoppable(t, cfg)
	c := dialClient(t, addr)
	pr := &probev1.Probe{Handler: &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "127.0.0.1", Port: probedtest.Accepting(t)}},
		PeriodSeconds: 1, PeriodMilliseconds: ptr[int32](-950), TimeoutMilliseconds: ptr[int32](-950)}
	if _, err := c.Create(callCtx(t), &probev1.Target{Name: "fast", ReadinessProbe: pr}); err != nil {
		t.Fatal(err)
	}
	stop()
	addr = startServer(t, testConfig(t, "--data-dir", dir, "--min-period", "200ms", "--min-timeout", "300ms"))
	c = dialClient(t, addr)
	eff := waitTarget(t, c, "fast", probesRun((*probev1.TargetStatus).GetReadiness, 1)).GetStatus().GetReadiness().GetEffective()
	if eff.GetPeriod().AsDuration() != 200*time.Millisecond || eff.GetTimeout().AsDuration() != 300*time.Millisecond {
		t.Errorf("effective after raising the floors: period %v, timeout %v; want 200ms, 300ms", eff.GetPeriod().AsDuration(), eff.GetTimeout().AsDuration())
	}
}

// startStoppable is startServer with a function that stops the server
// (and checks how serve ended) before the test does.
func startStoppable(t *testing.T, cfg *config) (stop func(), addr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, func(a net.Addr) { ready <- a }) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	t.Cleanup(stop)
	select {
	case a := <-ready:
		return stop, a.String()
	case err := <-done:
		stopped = true
		t.Fatalf("serve returned before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not start within 30s")
	}
	return stop, ""
}

// TestProbeCredentialsStayHome: a same-host redirect to another port got
// the probe's Authorization header, and secrets in the probe URL's query
// were published in messages (and logged).
func TestProbeCredentialsStayHome(t *testing.T) {
	t.Parallel()
	addr := startServer(t, testConfig(t))
	c := dialClient(t, addr)
	other := make(chan http.Header, 16)
	otherSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case other <- r.Header.Clone():
		default:
		}
		io.WriteString(w, "other port")
	}), ReadHeaderTimeout: 5 * time.Second}
	otherLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go otherSrv.Serve(otherLis)
	t.Cleanup(func() { _ = otherSrv.Close() })
	redirect := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:"+strconv.Itoa(int(port(t, otherLis.Addr().String())))+"/", http.StatusFound)
	}), ReadHeaderTimeout: 5 * time.Second}
	redirectLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go redirect.Serve(redirectLis)
	t.Cleanup(func() { _ = redirect.Close() })

	pr := fastProbe()
	pr.Handler = &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "127.0.0.1", Port: port(t, redirectLis.Addr().String()),
		Path: "/?token=s3cret", HttpHeaders: []*probev1.HTTPHeader{{Name: "Authorization", Value: "Bearer s3cret"}}}}
	if _, err := c.Create(callCtx(t), &probev1.Target{Name: "redirected", ReadinessProbe: pr}); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-other:
		if h.Get("Authorization") != "" || strings.Contains(h.Get("Referer"), "s3cret") {
			t.Errorf("the other port got the probe's credentials: %v", h)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the redirect was not followed")
	}

	closed := fastProbe()
	closed.Handler = &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "127.0.0.1", Port: refused.Port(t), Path: "/health?token=s3cret"}}
	if _, err := c.Create(callCtx(t), &probev1.Target{Name: "closed", ReadinessProbe: closed}); err != nil {
		t.Fatal(err)
	}
	tg := waitTarget(t, c, "closed", probesRun((*probev1.TargetStatus).GetReadiness, 1))
	if m := tg.GetStatus().GetReadiness().GetLastMessage(); strings.Contains(m, "s3cret") || !strings.Contains(m, "token=REDACTED") {
		t.Errorf("message %q: want the query's value redacted", m)
	}
}
