package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	statuspb "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	_ "google.golang.org/grpc/xds" // the xds:/// resolver and balancers, for TestXDSClientProcess
	"google.golang.org/grpc/xds/csds"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/refused"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// The xDS tests run a real probed (this package's binary) with
// --xds-addr, real gRPC backends it probes, and a real grpc-go client
// dialing xds:///SERVICE.NAMESPACE in a subprocess (grpc-go reads its
// bootstrap from the environment once, at init), and check what the
// client's RPCs did: which backend served each, and which failed.

// Environment of TestXDSClientProcess.
const (
	xdsClientTargetEnv = "PROBED_XDS_CLIENT_TARGET" // xds:///svc.ns
	xdsClientRateEnv   = "PROBED_XDS_CLIENT_RATE"   // RPCs a second
)

// TestXDSClientProcess is the grpc-go xDS client of the xDS tests, run as
// a subprocess of this test binary with GRPC_XDS_BOOTSTRAP_CONFIG set: it
// calls grpc.health.v1.Health/Check on the target at the given rate until
// its stdin closes, and prints a line per RPC: the time it ended (Unix
// nanoseconds), the backend that answered (its "backend" header, "-" for
// none) and the status code. It also prints, every time it changes, the
// state of each xDS resource its xDS client holds, as grpc-go's own
// client status discovery service (CSDS) reports it: "x TIME TYPE NAME
// VERSION STATUS NACK" (NACK: 1 if it holds an error, a rejected update).
func TestXDSClientProcess(t *testing.T) {
	target := os.Getenv(xdsClientTargetEnv)
	if target == "" {
		t.Skip("the xDS tests' client, run by them as a subprocess")
	}
	rate, err := strconv.Atoi(os.Getenv(xdsClientRateEnv))
	if err != nil || rate <= 0 {
		t.Fatalf("%s: %v", xdsClientRateEnv, err)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	stop := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stop) }()
	lines := make(chan string, 100000)
	var writer sync.WaitGroup
	writer.Go(func() {
		out := bufio.NewWriterSize(os.Stdout, 1<<16)
		flush := time.NewTicker(20 * time.Millisecond)
		defer flush.Stop()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					_ = out.Flush()
					return
				}
				_, _ = out.WriteString(l)
			case <-flush.C:
				_ = out.Flush()
			}
		}
	})
	csdsDone := make(chan struct{})
	writer.Go(func() { reportXDSState(t, stop, lines); close(csdsDone) })
	var rpcs sync.WaitGroup
	sem := make(chan struct{}, 500)
	tick := time.NewTicker(time.Second / time.Duration(rate))
loop:
	for {
		select {
		case <-stop:
			break loop
		case <-tick.C:
		}
		sem <- struct{}{}
		rpcs.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var md metadata.MD
			_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
			backend := "-"
			if v := md.Get("backend"); len(v) == 1 {
				backend = v[0]
			}
			lines <- fmt.Sprintf("%d %s %d\n", time.Now().UnixNano(), backend, status.Code(err))
		})
	}
	tick.Stop()
	rpcs.Wait()
	<-csdsDone
	close(lines)
	writer.Wait()
}

// reportXDSState sends to lines the state of every xDS resource of the
// process's xDS clients (CSDS) each time it changes, polling every 10 ms
// until stop is closed.
func reportXDSState(t *testing.T, stop <-chan struct{}, lines chan<- string) {
	srv, err := csds.NewClientStatusDiscoveryServer()
	if err != nil {
		t.Error(err)
		return
	}
	last := map[string]string{}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		resp, err := srv.FetchClientStatus(context.Background(), &statuspb.ClientStatusRequest{})
		if err != nil {
			t.Error(err)
			return
		}
		for _, cfg := range resp.GetConfig() {
			for _, x := range cfg.GetGenericXdsConfigs() {
				typ := x.GetTypeUrl()[strings.LastIndexByte(x.GetTypeUrl(), '.')+1:]
				nack := 0
				if x.GetErrorState() != nil {
					nack = 1
				}
				state := fmt.Sprintf("%s %s %d", cmp.Or(x.GetVersionInfo(), "-"), x.GetClientStatus(), nack)
				key := typ + " " + x.GetName()
				if last[key] != state {
					last[key] = state
					lines <- fmt.Sprintf("x %d %s %s\n", time.Now().UnixNano(), key, state)
				}
			}
		}
	}
}

// xdsState is the state of one xDS resource in the xDS client, from a
// change on (CSDS).
type xdsState struct {
	at      time.Time
	typ     string // Listener, Cluster, ClusterLoadAssignment
	name    string
	version string // "-": none yet
	status  string // REQUESTED, ACKED, NACKED, DOES_NOT_EXIST...
	nack    bool   // it holds a rejected update
}

// rpcResult is one RPC of the xDS client.
type rpcResult struct {
	at      time.Time
	backend string
	code    codes.Code
}

// xdsClient is a running TestXDSClientProcess.
type xdsClient struct {
	*testChild

	mu     sync.Mutex
	rpcs   []rpcResult
	states []xdsState
}

// startXDSClient starts the grpc-go client dialing target with probed's
// xDS server at server (plaintext), making rate RPCs a second.
func startXDSClient(t *testing.T, server, target string, rate int) *xdsClient {
	t.Helper()
	return startXDSClientWith(t, xdsBootstrap(server, `[{"type": "insecure"}]`, ""), target, rate)
}

// xdsBootstrap is a grpc-go bootstrap naming one xDS server, with its
// channel_creds and call_creds (JSON lists; none when empty).
func xdsBootstrap(server, channelCreds, callCreds string) string {
	if callCreds != "" {
		callCreds = `, "call_creds": ` + callCreds
	}
	return fmt.Sprintf(`{"xds_servers": [{"server_uri": %q, "channel_creds": %s%s, "server_features": ["xds_v3"]}], "node": {"id": "xds-test"}}`,
		server, channelCreds, callCreds)
}

// startXDSClientWith starts the grpc-go client dialing target with the
// bootstrap (and the environment variables env), making rate RPCs a
// second.
func startXDSClientWith(t *testing.T, bootstrap, target string, rate int, env ...string) *xdsClient {
	t.Helper()
	c := &xdsClient{}
	env = append([]string{"GRPC_XDS_BOOTSTRAP_CONFIG=" + bootstrap, xdsClientTargetEnv + "=" + target, xdsClientRateEnv + "=" + strconv.Itoa(rate)}, env...)
	c.testChild = startTestChild(t, "TestXDSClientProcess", env, 30*time.Second, c.record)
	return c
}

// record keeps what a line of the client says: an RPC's end, or (a line
// starting with "x") the state of an xDS resource.
func (c *xdsClient) record(line string) {
	f := strings.Fields(line)
	if len(f) == 7 && f[0] == "x" {
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return
		}
		c.mu.Lock()
		c.states = append(c.states, xdsState{at: time.Unix(0, ns), typ: f[2], name: f[3], version: f[4], status: f[5], nack: f[6] == "1"})
		c.mu.Unlock()
		return
	}
	if len(f) != 3 {
		return // the test framework's own lines
	}
	ns, err1 := strconv.ParseInt(f[0], 10, 64)
	code, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return
	}
	c.mu.Lock()
	c.rpcs = append(c.rpcs, rpcResult{at: time.Unix(0, ns), backend: f[1], code: codes.Code(code)})
	c.mu.Unlock()
}

// since returns the RPCs that ended at or after from.
func (c *xdsClient) since(from time.Time) []rpcResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, _ := slices.BinarySearchFunc(c.rpcs, from, func(r rpcResult, t time.Time) int { return r.at.Compare(t) })
	return slices.Clone(c.rpcs[i:])
}

// waitServed waits until every backend of want served an RPC after from
// (and no other did), and returns when.
func (c *xdsClient) waitServed(t *testing.T, from time.Time, want ...string) time.Time {
	t.Helper()
	var at time.Time
	poll.UntilMet(t, fmt.Sprintf("RPCs served by %v", want), 30*time.Second, func() string {
		seen := map[string]bool{}
		for _, r := range c.since(from) {
			if r.code == codes.OK {
				seen[r.backend] = true
			}
		}
		for _, b := range want {
			if !seen[b] {
				return fmt.Sprintf("none by %s yet (served by %v)\n%s", b, seen, c.stderr.String())
			}
		}
		at = time.Now()
		return ""
	})
	return at
}

// checkXDSStates checks what the client's xDS client held, from its
// start: every resource ACKed once it had a version, none rejected
// (NACK), none ever said not to exist, and each resource's version
// (a revision of probed's event log) never going backwards. It returns
// the last version of each resource, by "TYPE NAME".
func (c *xdsClient) checkXDSStates(t *testing.T) map[string]uint64 {
	t.Helper()
	c.mu.Lock()
	states := slices.Clone(c.states)
	c.mu.Unlock()
	last := map[string]uint64{}
	for _, s := range states {
		key := s.typ + " " + s.name
		switch {
		case s.nack || s.status == "NACKED":
			t.Errorf("the xDS client rejected %s at %v: %+v", key, s.at, s)
		case s.status == "DOES_NOT_EXIST":
			t.Errorf("the xDS client was told %s does not exist at %v", key, s.at)
		case s.version == "-":
			continue
		case s.status != "ACKED":
			t.Errorf("%s at %v: status %s at version %s", key, s.at, s.status, s.version)
		}
		v, err := strconv.ParseUint(s.version, 10, 64)
		if err != nil {
			t.Errorf("%s: version %q is not a revision", key, s.version)
			continue
		}
		if v < last[key] {
			t.Errorf("%s went back from version %d to %d at %v", key, last[key], v, s.at)
		}
		last[key] = v
	}
	for _, typ := range []string{"Listener", "Cluster", "ClusterLoadAssignment"} {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(last)), func(k string) bool { return strings.HasPrefix(k, typ+" ") }) {
			t.Errorf("the xDS client never held a %s (states %v)", typ, states)
		}
	}
	return last
}

// followFlip turns backend i NOT_SERVING and waits until the others
// serve and it has served nothing for 500 ms, then SERVING again and
// waits until it serves.
func (x *xdsClient) followFlip(t *testing.T, b *grpcBackends, i int, others ...string) {
	t.Helper()
	name := "b" + strconv.Itoa(i)
	b.set(i, false)
	x.waitServed(t, time.Now(), others...)
	poll.UntilMet(t, name+" drained", 30*time.Second, func() string {
		quiet := time.Now().Add(-500 * time.Millisecond)
		for _, r := range x.since(quiet) {
			if r.backend == name {
				return "still served at " + r.at.String()
			}
		}
		return ""
	})
	b.set(i, true)
	x.waitServed(t, time.Now(), name)
}

// failed returns the RPCs from from that failed.
func (c *xdsClient) failed(from time.Time) []rpcResult {
	var out []rpcResult
	for _, r := range c.since(from) {
		if r.code != codes.OK {
			out = append(out, r)
		}
	}
	return out
}

// grpcBackends are real gRPC servers on loopback with the health
// service; each names itself in the header "backend" of every answer.
type grpcBackends struct {
	t       *testing.T
	health  []*health.Server
	servers []*grpc.Server
	ports   []int32
}

func startGRPCBackends(t *testing.T, n int) *grpcBackends {
	t.Helper()
	b := &grpcBackends{t: t}
	for range n {
		b.add()
	}
	return b
}

// add starts one more backend, b<its index>, and returns its index.
func (b *grpcBackends) add() int {
	t := b.t
	t.Helper()
	name := "b" + strconv.Itoa(len(b.ports))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		_ = grpc.SetHeader(ctx, metadata.Pairs("backend", name))
		return handler(ctx, req)
	}))
	h := health.NewServer()
	healthpb.RegisterHealthServer(g, h)
	var wg sync.WaitGroup
	wg.Go(func() { _ = g.Serve(lis) })
	t.Cleanup(func() { g.Stop(); wg.Wait() })
	b.health = append(b.health, h)
	b.servers = append(b.servers, g)
	b.ports = append(b.ports, int32(lis.Addr().(*net.TCPAddr).Port))
	return len(b.ports) - 1
}

// stop stops backend i at once: its connections close, the RPCs in
// flight on them fail.
func (b *grpcBackends) stop(i int) { b.servers[i].Stop() }

// set makes backend i's health SERVING or NOT_SERVING.
func (b *grpcBackends) set(i int, serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	b.health[i].SetServingStatus("", st)
}

// target is a target of service svc in namespace ns probing backend i's
// gRPC health every period, one probe to flip either way.
func (b *grpcBackends) target(ns, svc string, i int, period time.Duration) *probev1.Target {
	ms := int32(period/time.Millisecond) - 1000
	return &probev1.Target{
		Name:   fmt.Sprintf("%s/%s-%d", ns, svc, i),
		Labels: map[string]string{"probed.io/service": svc},
		ReadinessProbe: &probev1.Probe{
			Handler:            &probev1.Probe_Grpc{Grpc: &probev1.GRPCAction{Host: "127.0.0.1", Port: b.ports[i]}},
			PeriodSeconds:      1,
			PeriodMilliseconds: &ms,
			TimeoutSeconds:     1,
			SuccessThreshold:   1,
			FailureThreshold:   1,
		},
		// Deleted, it drains for a minute (preStop sleep): it must leave
		// the service at once all the same.
		Lifecycle:                     &probev1.Lifecycle{PreStop: &probev1.LifecycleHandler{Action: &probev1.LifecycleHandler_Sleep{Sleep: &probev1.SleepAction{Seconds: 60}}}},
		TerminationGracePeriodSeconds: new(int64(90)),
	}
}

// xdsProbed is a probed process serving xDS.
type xdsProbed struct {
	*crashProcess
	xdsAddr string
	metrics string
}

// startXDSProbed starts probed with --xds-addr (and extra flags) over
// dir, and waits until it serves.
func startXDSProbed(t *testing.T, bin, dir string, extra ...string) *xdsProbed {
	t.Helper()
	p := &xdsProbed{xdsAddr: refused.Reserve(t).Addr(), metrics: refused.Reserve(t).Addr()}
	args := append([]string{"--addr", refused.Reserve(t).Addr(), "--xds-addr", p.xdsAddr, "--data-dir", dir,
		"--metrics-addr", p.metrics, "--min-period", "10ms", "--min-timeout", "10ms", "--registrations-per-second=0"}, extra...)
	if _, err := parseFlags(args, io.Discard); err != nil {
		t.Fatalf("flags %v: %v", args, err)
	}
	p.crashProcess = &crashProcess{t: t, bin: bin, args: args}
	if _, err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.kill()
		if t.Failed() {
			var xdsLog []string
			for line := range strings.Lines(p.log()) {
				if strings.Contains(line, "xds") {
					xdsLog = append(xdsLog, line)
				}
			}
			t.Logf("probed's xDS log:\n%s", strings.Join(xdsLog[max(0, len(xdsLog)-50):], ""))
		}
	})
	return p
}

// restart starts the process again with the same flags.
func (p *xdsProbed) restart(t *testing.T) {
	t.Helper()
	if _, err := p.start(); err != nil {
		t.Fatal(err)
	}
}

func dialProbedClient(t *testing.T, addrs string) *client.Client {
	t.Helper()
	c, err := client.Dial(t.Context(), addrs, client.WithDialOptions(crashReconnect))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestXDSClientFollowsReadiness drives a real grpc-go xds:/// client
// through a probed (a 50 ms gRPC probe of each of three backends):
//   - it reaches every ready backend, and a target that is not ready
//     gets no RPC;
//   - a backend turning NOT_SERVING stops getting RPCs, and gets them
//     again when SERVING, with no RPC failing meanwhile;
//   - a deleted target in its preStop sleep gets no RPC from its
//     deletion on (a drain loses nothing);
//   - kill -9 of probed, then a restart over its data: no RPC fails, the
//     client rejects nothing (no NACK), and the next flip is followed.
func TestXDSClientFollowsReadiness(t *testing.T) {
	bin := buildProbed(t)
	dir := t.TempDir()
	p := startXDSProbed(t, bin, dir)
	b := startGRPCBackends(t, 4)
	b.set(3, false) // never ready
	c := dialProbedClient(t, p.addr())
	ctx := t.Context()
	for i := range 4 {
		if _, err := c.Create(ctx, b.target("ns", "svc", i, 50*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	x := startXDSClient(t, p.xdsAddr, "xds:///svc.ns", 200)
	start := time.Now()
	x.waitServed(t, start, "b0", "b1", "b2")

	// A flip each way.
	x.followFlip(t, b, 0, "b1", "b2")
	if f := x.failed(start); len(f) > 0 {
		t.Fatalf("%d RPCs failed across a flip, first %+v", len(f), f[0])
	}
	for _, r := range x.since(start) {
		if r.backend == "b3" {
			t.Fatalf("the never-ready backend got an RPC at %v", r.at)
		}
	}

	// A drain: b2's target deleted, in its preStop sleep.
	if _, err := c.Delete(ctx, "ns/svc-2"); err != nil {
		t.Fatal(err)
	}
	poll.UntilMet(t, "b2 drained after its deletion", 10*time.Second, func() string {
		for _, r := range x.since(time.Now().Add(-500 * time.Millisecond)) {
			if r.backend == "b2" {
				return "still served"
			}
		}
		return ""
	})
	if tg, err := c.Get(ctx, "ns/svc-2"); err != nil || tg.GetStatus().GetPhase() != probev1.Phase_PHASE_TERMINATING {
		t.Errorf("ns/svc-2 = %v, %v; want still terminating", tg.GetStatus(), err)
	}

	// kill -9 of probed, with the client attached, then a restart.
	killed := p.kill()
	x.waitServed(t, time.Now(), "b0", "b1") // cached: the client goes on
	p.restart(t)
	x.followFlip(t, b, 1, "b0")
	if f := x.failed(start); len(f) > 0 {
		t.Fatalf("%d RPCs failed, first %+v (kill at %v)", len(f), f[0], killed)
	}
	if n := labelledMetric(metricsText(t, p.metrics), "probed_xds_requests_total", `result="nack"`); n != 0 {
		t.Errorf("%v NACKs after the restart", n)
	}
	x.stop(t)
	x.checkXDSStates(t)
}

// labelledMetric sums the samples of name whose labels include label.
func labelledMetric(text, name, label string) float64 {
	var sum float64
	for line := range strings.Lines(text) {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok || !strings.Contains(rest, label) {
			continue
		}
		fields := strings.Fields(rest)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}
