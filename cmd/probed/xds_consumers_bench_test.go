package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	statuspb "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds/csds"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/poll"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Environment of TestXDSConsumersProcess.
const (
	xdsConsumersEnv = "PROBED_XDS_CONSUMERS" // how many services, svc-0.ns...
)

// TestXDSConsumersProcess is the grpc-go process of the consumer
// benchmarks, run with GRPC_XDS_BOOTSTRAP_CONFIG set: it opens one
// channel to each of xds:///svc-0.ns ... xds:///svc-N-1.ns (grpc-go runs
// an xDS client, so an ADS stream, per channel target) and connects them,
// then prints every 200 ms, until its stdin closes, how many
// ClusterLoadAssignments its xDS clients hold ACKed and how many NACKed:
// "acked N nacked M".
func TestXDSConsumersProcess(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv(xdsConsumersEnv))
	if err != nil {
		t.Skip("the consumer benchmarks' xDS client, run by them as a subprocess")
	}
	for i := range n {
		conn, err := grpc.NewClient(fmt.Sprintf("xds:///svc-%d.ns", i), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.Connect()
	}
	stop := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stop) }()
	srv, err := csds.NewClientStatusDiscoveryServer()
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var lastSummary string
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		resp, err := srv.FetchClientStatus(context.Background(), &statuspb.ClientStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var acked, nacked int
		var waiting []string
		for _, cfg := range resp.GetConfig() {
			for _, x := range cfg.GetGenericXdsConfigs() {
				switch {
				case x.GetErrorState() != nil:
					nacked++
					waiting = append(waiting, fmt.Sprintf("%s %s: %v", x.GetTypeUrl(), x.GetName(), x.GetErrorState()))
				case strings.HasSuffix(x.GetTypeUrl(), ".ClusterLoadAssignment") && x.GetClientStatus().String() == "ACKED":
					acked++
				case x.GetClientStatus().String() != "ACKED":
					waiting = append(waiting, fmt.Sprintf("%s %s %s", x.GetTypeUrl()[strings.LastIndexByte(x.GetTypeUrl(), '.')+1:], x.GetName(), x.GetClientStatus()))
				}
			}
		}
		fmt.Printf("acked %d nacked %d\n", acked, nacked)
		switch summary := notAcked(waiting); {
		case len(waiting) > 0 && len(waiting) < 20:
			fmt.Fprintf(os.Stderr, "%s not acked: %v\n", time.Now().Format(time.StampMilli), waiting)
		case summary != lastSummary:
			// Many waiting: what kind of resource and in what state, when it changes.
			fmt.Fprintf(os.Stderr, "%s not acked: %s\n", time.Now().Format(time.StampMilli), summary)
			lastSummary = summary
		}
	}
}

// notAcked counts the waiting resources of TestXDSConsumersProcess by
// their first two words (type and status, or type and name for an
// error), as "Type STATUS: N, ...".
func notAcked(waiting []string) string {
	counts := map[string]int{}
	for _, w := range waiting {
		f := strings.Fields(w)
		if len(f) > 2 {
			f = f[:1]
			f = append(f, w[strings.LastIndexByte(w, ' ')+1:])
		}
		counts[strings.Join(f, " ")]++
	}
	keys := slices.Sorted(maps.Keys(counts))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

// xdsConsumers is a running TestXDSConsumersProcess.
type xdsConsumers struct {
	*testChild
	acked  atomic.Int64
	nacked atomic.Int64
}

// startXDSConsumers starts n grpc-go channels, to svc-0.ns..., with the
// xDS server at server, and waits until each holds its assignment.
func startXDSConsumers(t *testing.T, server string, n int) *xdsConsumers {
	t.Helper()
	c := &xdsConsumers{}
	env := []string{"GRPC_XDS_BOOTSTRAP_CONFIG=" + xdsBootstrap(server, `[{"type": "insecure"}]`, ""), xdsConsumersEnv + "=" + strconv.Itoa(n)}
	// 500 channels closing on a loaded machine take their time.
	c.testChild = startTestChild(t, "TestXDSConsumersProcess", env, 2*time.Minute, func(line string) {
		var a, k int64
		if _, err := fmt.Sscanf(line, "acked %d nacked %d", &a, &k); err == nil {
			c.acked.Store(a)
			c.nacked.Store(k)
		}
	})
	poll.UntilMet(t, fmt.Sprintf("%d channels holding their assignment", n), 5*time.Minute, func() string {
		if a := c.acked.Load(); a < int64(n) {
			text := c.stderr.String()
			return fmt.Sprintf("%d acked\n%s", a, text[max(0, len(text)-4000):])
		}
		return ""
	})
	return c
}

// probeLog is an HTTP backend for many targets at one address: target i
// probes /t/i; it records when each probe came, and answers 503 while
// the target is down.
type probeLog struct {
	port  int32
	down  []atomic.Bool
	mu    [64]sync.Mutex // stripes of times
	times [][]time.Time
}

func startProbeLog(t *testing.T, targets int) *probeLog {
	t.Helper()
	l := &probeLog{down: make([]atomic.Bool, targets), times: make([][]time.Time, targets)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/t/"))
		if err != nil || i < 0 || i >= targets {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		mu := &l.mu[i%len(l.mu)]
		mu.Lock()
		l.times[i] = append(l.times[i], now)
		mu.Unlock()
		if l.down[i].Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(lis) })
	t.Cleanup(func() { _ = srv.Close(); wg.Wait() })
	l.port = int32(lis.Addr().(*net.TCPAddr).Port)
	return l
}

// startGRPCSink starts one gRPC server (no service) on n loopback ports
// and returns them: endpoints an xDS client's channels connect to and
// then leave alone, so that a benchmark's clients do not spend the
// machine reconnecting to ports that refuse.
func startGRPCSink(t *testing.T, n int) []int32 {
	t.Helper()
	g := grpc.NewServer()
	var wg sync.WaitGroup
	ports := make([]int32, n)
	for i := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = int32(lis.Addr().(*net.TCPAddr).Port)
		wg.Go(func() { _ = g.Serve(lis) })
	}
	t.Cleanup(func() { g.Stop(); wg.Wait() })
	return ports
}

// probeTiming is what the backend saw of the probes over a window.
type probeTiming struct {
	probes         int     // every target's
	perPeriod      float64 // probes per target per period, over every target
	minPer, maxPer int     // the fewest and most probes one target got
	spread         []time.Duration
}

// window returns what the probes of [from, to) were, for a period.
func (l *probeLog) window(from, to time.Time, period time.Duration) probeTiming {
	var pt probeTiming
	pt.minPer = int(^uint(0) >> 1)
	total := 0
	for i := range l.times {
		mu := &l.mu[i%len(l.mu)]
		mu.Lock()
		ts := l.times[i]
		a, _ := slices.BinarySearchFunc(ts, from, func(x, y time.Time) int { return x.Compare(y) })
		b, _ := slices.BinarySearchFunc(ts, to, func(x, y time.Time) int { return x.Compare(y) })
		in := ts[a:b]
		for j := 1; j < len(in); j++ {
			d := in[j].Sub(in[j-1]) - period
			if d < 0 {
				d = -d
			}
			pt.spread = append(pt.spread, d)
		}
		mu.Unlock()
		total += len(in)
		pt.minPer = min(pt.minPer, len(in))
		pt.maxPer = max(pt.maxPer, len(in))
	}
	pt.probes = total
	pt.perPeriod = float64(total) / float64(len(l.times)) / (to.Sub(from).Seconds() / period.Seconds())
	return pt
}

// perProbe is cpu over probes, in µs.
func perProbe(cpu time.Duration, probes int) float64 {
	return float64(cpu.Microseconds()) / float64(max(probes, 1))
}

// TestXDSConsumersCost measures the cost of consumers: probed with 5,000
// targets (PROBED_XDS_BENCH_TARGETS) probed over HTTP every 500 ms, in
// 500 services of 10 (each endpoint its own serving port, where a gRPC
// server accepts the consumers' connections), 1 % of them
// flipping every 5 s, alternately without consumers and with 500 xDS
// streams (one real grpc-go channel per service, its own xDS client and
// stream) and 500 Watch streams (one per service, through the Go client),
// PROBED_XDS_BENCH_ROUNDS (3) times each, every window
// PROBED_XDS_BENCH_WINDOW (30 s). Per window: probed's CPU (rusage), the
// probes each target got per period (the backend's count: it must not
// grow with consumers), and the spread of the intervals between two
// probes of a target around the period.
func TestXDSConsumersCost(t *testing.T) {
	if os.Getenv(xdsBenchEnv) == "" {
		t.Skipf("a benchmark: set %s=1 (BENCHMARKS.md)", xdsBenchEnv)
	}
	targets := benchInt("PROBED_XDS_BENCH_TARGETS", 5000)
	rounds := benchInt("PROBED_XDS_BENCH_ROUNDS", 3)
	window := time.Duration(benchInt("PROBED_XDS_BENCH_WINDOW", 30)) * time.Second
	const (
		period  = 500 * time.Millisecond
		perSvc  = 10
		flipPct = 1
	)
	services := targets / perSvc
	bin := buildProbed(t)
	p := startXDSProbed(t, bin, t.TempDir(), "--log-level", "warn", "--max-targets", strconv.Itoa(targets+100),
		"--max-watchers", strconv.Itoa(2*services+100), "--max-watchers-per-client", "0",
		"--max-connections-per-ip", "0") // grpc-go opens a connection per channel target: 500 from one address
	backend := startProbeLog(t, targets)
	serving := startGRPCSink(t, targets)
	c := dialProbedClient(t, p.addr())
	ms := int32(-500)
	set := client.TargetSet{Owner: "bench"}
	for i := range targets {
		set.Targets = append(set.Targets, &probev1.Target{
			Name: fmt.Sprintf("ns/t-%d", i),
			Labels: map[string]string{"probed.io/service": fmt.Sprintf("svc-%d", i/perSvc),
				"probed.io/serving-port": strconv.Itoa(int(serving[i]))},
			ReadinessProbe: &probev1.Probe{
				Handler:            &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "127.0.0.1", Port: backend.port, Path: "/t/" + strconv.Itoa(i)}},
				PeriodSeconds:      1,
				PeriodMilliseconds: &ms,
				TimeoutSeconds:     1,
				SuccessThreshold:   1,
				FailureThreshold:   1,
			},
		})
	}
	ctx := t.Context()
	if _, err := c.ApplyTargets(ctx, set); err != nil {
		t.Fatal(err)
	}
	// 1 % of the targets flip every 5 s, in every window alike.
	flipCtx, stopFlips := context.WithCancel(ctx)
	var flipping sync.WaitGroup
	defer flipping.Wait()
	defer stopFlips()
	flipping.Go(func() {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-flipCtx.Done():
				return
			case <-tick.C:
			}
			for i := 0; i < targets; i += 100 / flipPct {
				backend.down[i].Store(!backend.down[i].Load())
			}
		}
	})
	time.Sleep(10 * time.Second) // warm-up: every target probed a few times (a benchmark's pacing)

	type result struct {
		cpu           time.Duration
		timing        probeTiming
		pushes, bytes float64
	}
	measure := func() result {
		text0 := metricsText(t, p.metrics)
		cpu0 := processCPU(t, p.pid())
		from := time.Now()
		time.Sleep(window) // the measured window
		to := time.Now()
		cpu := processCPU(t, p.pid()) - cpu0
		text1 := metricsText(t, p.metrics)
		return result{
			cpu:    cpu,
			timing: backend.window(from, to, period),
			pushes: sumMetric(text1, "probed_xds_pushes_total") - sumMetric(text0, "probed_xds_pushes_total"),
			bytes:  sumMetric(text1, "probed_xds_push_bytes_total") - sumMetric(text0, "probed_xds_push_bytes_total"),
		}
	}
	var without, with []result
	report := func(name string, r result) {
		t.Logf("%-8s CPU %v (%.1f%% of a core), %d probes: %.1f µs a probe; probes per target per period %.3f (min %d, max %d in %v); interval - period: %s; xDS pushes %.0f, %.0f bytes",
			name, r.cpu.Round(time.Millisecond), 100*r.cpu.Seconds()/window.Seconds(), r.timing.probes, perProbe(r.cpu, r.timing.probes),
			r.timing.perPeriod, r.timing.minPer, r.timing.maxPer, window, percentiles(r.timing.spread), r.pushes, r.bytes)
	}
	var watchers []*client.Client
	for range (services + 49) / 50 {
		watchers = append(watchers, dialProbedClient(t, p.addr()))
	}
	for round := range rounds {
		r := measure()
		report("without", r)
		without = append(without, r)

		cons := startXDSConsumers(t, p.xdsAddr, services)
		wctx, stopWatches := context.WithCancel(ctx)
		var watching sync.WaitGroup
		var snapshots atomic.Int64
		for s := range services {
			// 50 streams per connection (probed allows 100, --max-streams-per-connection).
			ch := watchers[s/50].Watch(wctx, client.WithLabels(map[string]string{"probed.io/service": fmt.Sprintf("svc-%d", s)}))
			watching.Go(func() {
				for resp := range ch {
					if resp.SnapshotComplete {
						snapshots.Add(1)
					}
				}
			})
		}
		poll.UntilMet(t, "every Watch stream past its snapshot", 5*time.Minute, func() string {
			if n := snapshots.Load(); n < int64(services) {
				return fmt.Sprintf("%d of %d", n, services)
			}
			return ""
		})
		if n := sumMetric(metricsText(t, p.metrics), "probed_xds_streams"); n != float64(services) {
			t.Errorf("%v xDS streams open, want %d (one per channel)", n, services)
		}
		r = measure()
		report("with", r)
		with = append(with, r)
		if n := cons.nacked.Load(); n != 0 {
			t.Errorf("round %d: the consumers hold %d rejected resources", round, n)
		}
		stopWatches()
		watching.Wait()
		cons.stop(t)
	}
	sum := func(rs []result) (cpu time.Duration, probes int) {
		for _, r := range rs {
			cpu += r.cpu
			probes += r.timing.probes
		}
		return cpu, probes
	}
	cw, pw := sum(with)
	cwo, pwo := sum(without)
	t.Logf("over %d rounds: CPU without consumers %v for %d probes, with %v for %d: %+.1f%% (%+.1f%% a probe)", rounds,
		cwo.Round(time.Millisecond), pwo, cw.Round(time.Millisecond), pw, 100*(cw.Seconds()/cwo.Seconds()-1), 100*(perProbe(cw, pw)/perProbe(cwo, pwo)-1))
	// One probe per target per period, consumers or not: at most one
	// more in a window than its periods (a window's two ends).
	bound := int(window/period) + 1
	for i := range without {
		if w, wo := with[i].timing.maxPer, without[i].timing.maxPer; w > bound || wo > bound {
			t.Errorf("round %d: a target got %d probes in a %v window with consumers, %d without; at most %d fit", i, w, window, wo, bound)
		}
	}
}
