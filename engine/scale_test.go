package engine_test

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/poll"
)

// raiseFileLimit lifts the soft limit on open files to the hard one and
// returns it.
func raiseFileLimit(t *testing.T) uint64 {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	old := lim.Cur
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lim.Cur = old
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	})
	return lim.Max
}

// TestHangingTargetsDoNotDelayHealthyOnes registers 10,000 targets whose
// server never answers (a listener that never accepts: connections hang in
// the handshake or the request until the probe's 1.9s timeout) next to a
// healthy target probed every 100ms. With the fake clock standing still at each due
// time, the healthy probe must run at exactly that time while thousands of
// hanging probes are in flight: a scheduler or dispatcher that waited for
// them would never get there, since their timeouts only pass when the clock
// moves.
func TestHangingTargetsDoNotDelayHealthyOnes(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 sockets; skipped with -short")
	}
	n := 10_000
	if limit := raiseFileLimit(t); limit < uint64(n)+2000 {
		n = int(limit) - 2000
		t.Logf("open-file limit %d: using %d hanging targets", limit, n)
	}
	baseline := runtime.NumGoroutine()
	h := newHarness(t)
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	port := int32(hang.Addr().(*net.TCPAddr).Port)
	healthy := h.newBackend(200)
	ctx := context.Background()
	for i := range n {
		p := &probe.Spec{
			Handler:             probe.Handler{HTTPGet: &probe.HTTPGet{Host: "127.0.0.1", Port: port}},
			PeriodSeconds:       2,
			TimeoutSeconds:      2,
			TimeoutMilliseconds: ptr[int32](-100), // 1.9s: they hang through the whole test
		}
		if _, err := h.eng.Create(ctx, &target.Spec{Name: fmt.Sprintf("hang-%d", i), LivenessProbe: p}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.eng.Create(ctx, &target.Spec{Name: "healthy", ReadinessProbe: healthy.probe(1, -900)}); err != nil {
		t.Fatal(err)
	}
	total := func() uint64 { return h.get("healthy").Status.Probes[probe.Readiness].ProbesTotal }
	// The bound is generous: with the fake clock every probe's timeout is a
	// fake timer, and clockwork keeps its timers in a slice it sorts on
	// every insert, so 10,000 runs starting together cost real seconds
	// (more under -race on a loaded machine). What matters is that the
	// healthy probe runs at its exact fake due time without the clock
	// moving, however long that takes in real time.
	waitTotal := func(want uint64) {
		t.Helper()
		poll.UntilMet(t, "the healthy probe's run", 2*time.Minute, func() string {
			if total() >= want {
				return ""
			}
			return fmt.Sprintf("healthy probe %d did not run at %v while the clock stood still (%d probes in flight)",
				want, h.clock.Now().Sub(t0), h.eng.Stats().Inflight)
		})
	}
	waitTotal(1) // its first run, at creation
	maxInflight := int64(0)
	for i := 1; i <= 15; i++ { // 1.5s, all of it with the hanging probes in flight
		h.clock.Advance(100 * time.Millisecond)
		waitTotal(uint64(i + 1))
		ps := h.get("healthy").Status.Probes[probe.Readiness]
		if want := t0.Add(time.Duration(i) * 100 * time.Millisecond); !ps.LastProbeTime.Equal(want) {
			t.Fatalf("healthy probe %d ran at %v, want %v", i, ps.LastProbeTime.Sub(t0), want.Sub(t0))
		}
		maxInflight = max(maxInflight, h.eng.Stats().Inflight)
	}
	if maxInflight < int64(n)/2 {
		t.Fatalf("at most %d probes were in flight; the hanging targets did not hang (want about %d)", maxInflight, n)
	}
	t.Logf("%d hanging targets, up to %d probes in flight; the healthy probe ran at every due time", n, maxInflight)
	for i := range n { // stop them before the harness stops the engine
		if _, err := h.eng.Delete(ctx, fmt.Sprintf("hang-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// net/http finishes a cancelled request's dial in the background; the
	// dials still waiting for a SYN-ACK end when the closed port answers
	// their next retransmission with a reset.
	hang.Close()
	// The engine keeps up to 256 idle probe workers.
	poll.UntilMet(t, "the hanging targets' goroutines to end", 60*time.Second, func() string {
		if n := runtime.NumGoroutine(); n > baseline+256+100 {
			return fmt.Sprintf("%d goroutines still running a minute after the hanging targets were removed (baseline %d)", n, baseline)
		}
		return ""
	})
}
