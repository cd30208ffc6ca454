package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/internal/poll"
)

// xdsBenchEnv runs TestXDSFlipLatency (BENCHMARKS.md, "xDS").
const xdsBenchEnv = "PROBED_XDS_BENCH"

// TestXDSFlipLatency measures, with a real grpc-go xds:/// client at
// about 2,000 RPC/s over three backends probed every 50 ms (one probe to
// flip), the time from a backend turning NOT_SERVING to the last RPC it
// served, and from SERVING to the first, over 20 flips each way; and the
// failed RPCs (there must be none: the other backends stay healthy). It
// reports probed's CPU time (rusage) over the run.
func TestXDSFlipLatency(t *testing.T) {
	if os.Getenv(xdsBenchEnv) == "" {
		t.Skipf("a benchmark: set %s=1 (BENCHMARKS.md)", xdsBenchEnv)
	}
	flips, rate := 20, 2000
	if v, err := strconv.Atoi(os.Getenv("PROBED_XDS_BENCH_FLIPS")); err == nil {
		flips = v
	}
	bin := buildProbed(t)
	p := startXDSProbed(t, bin, t.TempDir(), "--log-level", "warn")
	b := startGRPCBackends(t, 3)
	c := dialProbedClient(t, p.addr())
	for i := range 3 {
		if _, err := c.Create(t.Context(), b.target("ns", "svc", i, 50*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	x := startXDSClient(t, p.xdsAddr, "xds:///svc.ns", rate)
	start := time.Now()
	x.waitServed(t, start, "b0", "b1", "b2")
	cpu0 := processCPU(t, p.pid())
	measured := time.Now()
	var down, up []time.Duration
	for range flips {
		time.Sleep(300 * time.Millisecond) // a benchmark's pacing, not a wait for an effect
		b.set(0, false)
		t0 := time.Now()
		time.Sleep(time.Second) // the flip's window: the last RPC b0 served in it is measured
		last := t0
		for _, r := range x.since(t0) {
			if r.backend == "b0" {
				last = r.at
			}
		}
		down = append(down, last.Sub(t0))
		b.set(0, true)
		t1 := time.Now()
		x.waitServed(t, t1, "b0")
		for _, r := range x.since(t1) {
			if r.backend == "b0" {
				up = append(up, r.at.Sub(t1))
				break
			}
		}
	}
	elapsed := time.Since(measured)
	cpu := processCPU(t, p.pid()) - cpu0
	rpcs := x.since(measured)
	failed := x.failed(start)
	t.Logf("flip down (NOT_SERVING -> last RPC served): %s", percentiles(down))
	t.Logf("flip up (SERVING -> first RPC served): %s", percentiles(up))
	t.Logf("%d RPCs in %v (%.0f/s), %d failed; probed CPU %v (%.1f%% of one core)",
		len(rpcs), elapsed.Round(time.Millisecond), float64(len(rpcs))/elapsed.Seconds(), len(failed), cpu, 100*cpu.Seconds()/elapsed.Seconds())
	if len(failed) > 0 {
		t.Errorf("%d RPCs failed, first %+v", len(failed), failed[0])
	}
}

// percentiles formats p50, p90, p99 and max of ds.
func percentiles(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return "none"
	}
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return fmt.Sprintf("n=%d p50 %v p90 %v p99 %v max %v", len(s), at(0.5).Round(time.Millisecond), at(0.9).Round(time.Millisecond), at(0.99).Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

// processCPU is the user + system CPU time of process pid so far.
func processCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command (in parentheses): utime is the 12th, stime the 13th.
	s := string(b)
	i := len(s) - 1
	for i >= 0 && s[i] != ')' {
		i--
	}
	f := strings.Fields(s[i+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ
	return time.Duration(ut+st) * time.Second / hz
}

// benchInt is the integer in the environment variable name, or def.
func benchInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestXDSKillUnderLoad measures kill -9 of the probed a real grpc-go
// xds:/// client is attached to, at about 2,000 RPC/s over three backends
// (50 ms gRPC probes), PROBED_XDS_BENCH_KILLS times (5) each:
//   - single: probed killed, then started again over its data;
//   - cluster: three replicas over etcd behind a failover TCP proxy; the
//     replica the client is on is killed (the client moves to another),
//     and started again after the flip that follows.
//
// After each kill a backend is flipped NOT_SERVING and back. It reports,
// per kill, the time until the client's xDS stream is open again (a
// replica counts it in probed_xds_streams) and the time from that flip
// to the last RPC the flipped backend served; over the run, the RPCs and
// the failed ones (there must be none), and checks what the client's xDS
// client held (no NACK, no resource said not to exist, versions never
// back).
func TestXDSKillUnderLoad(t *testing.T) {
	if os.Getenv(xdsBenchEnv) == "" {
		t.Skipf("a benchmark: set %s=1 (BENCHMARKS.md)", xdsBenchEnv)
	}
	kills, rate := benchInt("PROBED_XDS_BENCH_KILLS", 5), benchInt("PROBED_XDS_BENCH_RATE", 2000)
	t.Run("single", func(t *testing.T) {
		bin := buildProbed(t)
		p := startXDSProbed(t, bin, t.TempDir(), "--log-level", "warn")
		b := startGRPCBackends(t, 3)
		c := dialProbedClient(t, p.addr())
		for i := range 3 {
			if _, err := c.Create(t.Context(), b.target("ns", "svc", i, 50*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
		}
		x := startXDSClient(t, p.xdsAddr, "xds:///svc.ns", rate)
		benchKills(t, x, b, kills, func() time.Time {
			at := p.kill()
			p.restart(t)
			return at
		}, func() {
			poll.UntilMet(t, "the client's xDS stream on the restarted probed", time.Minute, func() string {
				if n := sumMetric(metricsText(t, p.metrics), "probed_xds_streams"); n != 1 {
					return fmt.Sprintf("%v streams", n)
				}
				return ""
			})
		}, func() {})
		if n := labelledMetric(metricsText(t, p.metrics), "probed_xds_requests_total", `result="nack"`); n != 0 {
			t.Errorf("%v NACKs", n)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		c := startXDSCluster(t, 3)
		b := startGRPCBackends(t, 3)
		for i := range 3 {
			if _, err := c.client.Create(t.Context(), b.target("ns", "svc", i, 50*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
		}
		x := startXDSClient(t, c.proxy.Addr(), "xds:///svc.ns", rate)
		var victim *clusterReplica
		benchKills(t, x, b, kills, func() time.Time {
			victim = c.attached(t, 1)
			return victim.kill()
		}, func() {
			c.attached(t, 1)
		}, func() {
			if _, err := victim.start(); err != nil {
				t.Fatal(err)
			}
		})
		if n := c.nacks(t); n != 0 {
			t.Errorf("%v NACKs", n)
		}
	})
}

// benchKills kills (kill) the probed x is attached to kills times, waits
// until x is attached again (attached), flips a backend down and up, and
// calls after; it reports what TestXDSKillUnderLoad says.
func benchKills(t *testing.T, x *xdsClient, b *grpcBackends, kills int, kill func() time.Time, attached, after func()) {
	t.Helper()
	start := time.Now()
	x.waitServed(t, start, "b0", "b1", "b2")
	measured := time.Now()
	var reattach, down []time.Duration
	for k := range kills {
		time.Sleep(time.Second) // a benchmark's pacing, not a wait for an effect
		killed := kill()
		attached()
		reattach = append(reattach, time.Since(killed))
		i := k % 3
		b.set(i, false)
		t0 := time.Now()
		time.Sleep(2 * time.Second) // the flip's window: the last RPC the backend served in it
		last := t0
		for _, r := range x.since(t0) {
			if r.backend == "b"+strconv.Itoa(i) {
				last = r.at
			}
		}
		down = append(down, last.Sub(t0))
		b.set(i, true)
		x.waitServed(t, time.Now(), "b"+strconv.Itoa(i))
		after()
		t.Logf("kill %d: attached again after %v; b%d's last RPC %v after its flip", k+1, reattach[k].Round(time.Millisecond), i, down[k].Round(time.Millisecond))
	}
	elapsed := time.Since(measured)
	rpcs, failed := x.since(measured), x.failed(start)
	t.Logf("attached again after a kill: %s", percentiles(reattach))
	t.Logf("the flip after a kill (NOT_SERVING -> last RPC served): %s", percentiles(down))
	t.Logf("%d RPCs in %v (%.0f/s), %d failed", len(rpcs), elapsed.Round(time.Millisecond), float64(len(rpcs))/elapsed.Seconds(), len(failed))
	if len(failed) > 0 {
		t.Errorf("%d RPCs failed, first %+v", len(failed), failed[0])
	}
	x.stop(t)
	x.checkXDSStates(t)
}
