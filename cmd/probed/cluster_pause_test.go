package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probed/probed/internal/poll"
)

// TestClusterPausedReplicaProbesNothing: a replica stopped (SIGSTOP) past
// its lease and continued (SIGCONT) runs none of its overdue probes,
// although its timer wheel wakes together with its lease watchdog: it
// checks its lease's local deadline before it probes, so the targets its
// lease no longer covers (the survivors probe them now) are not probed by
// two replicas.
//
// The backends tell who probed: the survivor is stopped too, once the
// victim's member key is gone and it owns no shard, and the backends
// have answered every request the survivor sent before; from the victim's SIGCONT until it has dropped every target and
// ended every probe, each request the backends get is the victim's (it
// joins again as a newcomer, and the survivor's lease keeps its shards
// for a TTL). Every target of the victim's is overdue at SIGCONT: it was
// stopped for more than a TTL, its targets' period is a quarter of that.
func TestClusterPausedReplicaProbesNothing(t *testing.T) {
	clusterLong(t)
	const targets = 200
	run := startClusterRun(t, 1, clusterTTL, 2, targets)
	run.create(t, targets)
	run.waitStableReady(t, targets)

	survivor, victim := run.replicas[0], run.replicas[1]
	// Which wakes first at SIGCONT, the wheel's driver or the lease's
	// loss that drops the targets, is up to the scheduler. A round where
	// the loss came first runs nothing (checked), but does not show the
	// check before due fires: it is run again, up to five rounds.
	for round := 1; ; round++ {
		if pausedRound(t, run, survivor, victim, round == 5) {
			return
		}
		t.Logf("round %d: the lease's loss dropped the targets before the wheel handed out their overdue fires; again", round)
		survivor.signal(t, syscall.SIGCONT)
		poll.UntilMet(t, victim.id+" to probe its shards again", 30*time.Second, func() string {
			m := metricsText(t, victim.metrics)
			if n := sumMetric(m, "probed_probes_scheduled"); n == 0 || countOwned(run.owners(t), victim.id) == 0 {
				return fmt.Sprintf("%v probes scheduled", n)
			}
			return ""
		})
		run.waitStableReady(t, targets)
	}
}

// pausedRound stops victim (SIGSTOP) past its lease, then the survivor
// once it owns the victim's shards, continues the victim (SIGCONT) and
// checks that it probes nothing. It reports whether the victim's wheel
// handed out overdue fires, skipped for the lease, before the loss of the
// lease dropped its targets; last: fail the test if it did not.
func pausedRound(t *testing.T, run *clusterRun, survivor, victim *clusterReplica, last bool) bool {
	t.Helper()
	memberKey := clusterPrefix + "members/" + victim.id
	before := victim.metricSum(t, "prober_probe_total{")
	leaseSkips := victim.metricSum(t, `probed_scheduler_skipped_total{reason="lease"`)
	victim.signal(t, syscall.SIGSTOP)
	clusterPoll.Until(t, "the stopped replica's lease and shards gone", 6*clusterTTL, func() bool {
		return !run.exists(t, memberKey) && countOwned(run.owners(t), victim.id) == 0
	})
	survivor.signal(t, syscall.SIGSTOP)
	defer survivor.signal(t, syscall.SIGCONT)
	waitStopped(t, survivor)
	sent := run.backends.quiet(t)
	victim.signal(t, syscall.SIGCONT)
	poll.UntilMet(t, "the continued replica to drop its targets and end its probes", 10*time.Second, func() string {
		m := metricsText(t, victim.metrics)
		if n := sumMetric(m, "probed_probes_scheduled") + sumMetric(m, "probed_probes_inflight") + sumMetric(m, "probed_probes_cancelling"); n > 0 {
			return fmt.Sprintf("%v scheduled, in flight or cancelling", n)
		}
		return ""
	})
	requests := run.backends.requests() - sent
	after := victim.metricSum(t, "prober_probe_total{")
	leaseSkips = victim.metricSum(t, `probed_scheduler_skipped_total{reason="lease"`) - leaseSkips
	t.Logf("requests the replica sent after SIGCONT: %d; probes it ran across its pause: %v; due runs skipped for the lease: %v", requests, after-before, leaseSkips)
	if victim.metricSum(t, "probed_cluster_owned_shards") > 0 {
		t.Fatal("the continued replica owns shards again: the backends cannot tell whose the requests were")
	}
	// A run in flight at SIGSTOP ends after SIGCONT: a few at most.
	if requests > 5 {
		t.Errorf("the replica sent %d probes after SIGCONT with its lease over (the survivors own them)\n%s", requests, victim.clusterLog())
	}
	if ran := after - before; ran > 5 {
		t.Errorf("the replica ran %v probes after SIGCONT with its lease over (the survivors own them)\n%s", ran, victim.clusterLog())
	}
	// Its wheel hands the overdue fires out as it wakes, its lease
	// watchdog's loss drops the targets a few goroutines later: the
	// fires are skipped for the lease, or (without the check) run, some
	// or all of them getting their request out before the targets are
	// dropped.
	if leaseSkips > 0 || t.Failed() {
		return true
	}
	if last {
		t.Errorf("the replica skipped no due run for its lease after SIGCONT (its overdue fires ran, or were dropped with their targets before they were due)\n%s", victim.clusterLog())
		return true
	}
	return false
}

// waitStopped waits until the replica's process is stopped (SIGSTOP
// delivered: state T in /proc/PID/stat): it sends nothing from then on.
func waitStopped(t *testing.T, r *clusterReplica) {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/stat", r.pid())
	poll.UntilMet(t, r.id+" to stop", 10*time.Second, func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// pid (comm) state ...: comm may hold spaces, not ')'.
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) == 0 || f[0] != "T" {
			return "state " + strings.Join(f[:min(1, len(f))], "")
		}
		return ""
	})
}

// requests is how many requests the backends answered for targets.
func (b *crashBackends) requests() int64 {
	var n int64
	for i := range b.hits {
		n += b.hits[i].Load()
	}
	return n
}

// quiet waits until the backends got no request for 200 ms (every
// request a stopped process sent before it stopped has been read) and
// returns how many they got.
func (b *crashBackends) quiet(t *testing.T) int64 {
	t.Helper()
	n, since := b.requests(), time.Now()
	poll.UntilMet(t, "the backends to be quiet", 30*time.Second, func() string {
		if m := b.requests(); m != n {
			n, since = m, time.Now()
		}
		if time.Since(since) < 200*time.Millisecond {
			return fmt.Sprintf("%d requests, the latest %v ago", n, time.Since(since))
		}
		return ""
	})
	return n
}

// metricSum is the sum of the replica's metric lines that start with
// prefix (a metric with labels: name{).
func (r *clusterReplica) metricSum(t *testing.T, prefix string) float64 {
	t.Helper()
	var sum float64
	for line := range strings.Lines(metricsText(t, r.metrics)) {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			t.Fatalf("%s's metric %q: %v", r.id, line, err)
		}
		sum += v
	}
	return sum
}
