package main

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClusterPausedReplicaProbesNothing: a replica stopped (SIGSTOP) past
// its lease and continued (SIGCONT) runs none of its overdue probes,
// although its timer wheel wakes together with its lease watchdog: it
// checks its lease's local deadline before it probes, so the targets its
// lease no longer covers (the survivors probe them now) are not probed by
// two replicas.
func TestClusterPausedReplicaProbesNothing(t *testing.T) {
	clusterLong(t)
	const targets = 200
	run := startClusterRun(t, 1, clusterTTL, 2, targets)
	run.create(t, targets)
	run.waitStableReady(t, targets)

	victim := run.replicas[1]
	memberKey := clusterPrefix + "members/" + victim.id
	before := victim.metricSum(t, "prober_probe_total{")
	victim.signal(t, syscall.SIGSTOP)
	stoppedAt := time.Now()
	for run.exists(t, memberKey) || countOwned(run.owners(t), victim.id) > 0 {
		if time.Since(stoppedAt) > 6*clusterTTL {
			victim.signal(t, syscall.SIGCONT)
			t.Fatalf("the stopped replica still holds its lease or shards %v after SIGSTOP", time.Since(stoppedAt))
		}
		time.Sleep(20 * time.Millisecond)
	}
	victim.signal(t, syscall.SIGCONT)
	time.Sleep(clusterPeriod) // every overdue probe would have run by now
	after := victim.metricSum(t, "prober_probe_total{")
	skipped := victim.metricSum(t, `probed_scheduler_skipped_total{`)
	t.Logf("probes run by the replica across its pause: %v (skipped: %v)", after-before, skipped)
	// A run in flight at SIGSTOP ends after SIGCONT: a few at most.
	if ran := after - before; ran > 5 {
		t.Errorf("the replica ran %v probes after SIGCONT with its lease over (the survivors own them)\n%s", ran, victim.clusterLog())
	}
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
