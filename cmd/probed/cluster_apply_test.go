package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/poll"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestClusterApplyTargets: ApplyTargets through one replica of three
// (real processes over etcd) with a set whose targets live on every
// replica's shards: creates (conditional writes, in transactions within
// etcd's limits), updates and prunes of targets other replicas probe
// (forwarded to them), then the same set again changing nothing.
func TestClusterApplyTargets(t *testing.T) {
	run := startClusterRun(t, 1, clusterTTL, 3, 0)
	ctx := t.Context()
	c, err := client.Dial(ctx, run.replicas[0].addr(), client.WithDialOptions(crashReconnect))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	const n = 300
	set := func(gen, from, to int) client.TargetSet {
		s := client.TargetSet{Owner: "ctl", Selector: map[string]string{"set": "x"}}
		for i := from; i < to; i++ {
			s.Targets = append(s.Targets, &probev1.Target{Name: fmt.Sprintf("ns/t-%04d", i), Labels: map[string]string{"set": "x", "gen": fmt.Sprint(gen)}})
		}
		return s
	}
	apply := func(s client.TargetSet) *probev1.ApplyTargetsResponse {
		t.Helper()
		resp, err := c.ApplyTargets(ctx, s)
		if err != nil {
			t.Fatalf("ApplyTargets: %v", err)
		}
		return resp
	}
	if got := apply(set(0, 0, n)); len(got.GetCreated()) != n {
		t.Fatalf("created %d, want %d (conflicts %v)", len(got.GetCreated()), n, got.GetConflicts())
	}
	// Generation 1: t-0100..t-0299 updated (most on other replicas),
	// t-0000..t-0099 pruned, t-0300..t-0349 created.
	// While shards still change hands (the cluster rebalances for a few
	// seconds after its start), a forwarded update or prune can find no
	// owner: an update is then a conflict, a prune is left out of deleted,
	// and the next apply, as a controller's, finishes them.
	got := apply(set(1, 100, n+50))
	if first := len(got.GetUpdated()) + len(got.GetConflicts()); first != n-100 || len(got.GetDeleted()) > 100 || len(got.GetCreated()) != 50 {
		t.Fatalf("updated or in conflict %d, pruned %d, created %d; want %d, at most 100, 50", first, len(got.GetDeleted()), len(got.GetCreated()), n-100)
	}
	// Applied again every second, as a controller resyncs, until the set
	// is whole.
	replicas := map[string]bool{}
	applies := 1
	poll.Every(time.Second).UntilMet(t, "the set of generation 1, whole, after applies", 30*time.Second, func() string {
		all, err := c.ListAll(ctx, map[string]string{"set": "x"})
		if err != nil {
			t.Fatal(err)
		}
		active, stale := 0, 0
		for _, tg := range all {
			if tg.GetStatus().GetPhase() != probev1.Phase_PHASE_ACTIVE {
				continue
			}
			active++
			replicas[tg.GetStatus().GetReplica()] = true
			if tg.GetLabels()["gen"] != "1" || tg.GetOwner() != "ctl" {
				stale++
			}
		}
		if active == n-50 && stale == 0 {
			return ""
		}
		t.Logf("apply %d: %d conflicts, %d pruned (shards changing hands); applying again", applies, len(got.GetConflicts()), len(got.GetDeleted()))
		got = apply(set(1, 100, n+50))
		applies++
		return fmt.Sprintf("after %d applies: %d active targets, %d not of generation 1 or not owned by ctl; want %d and 0", applies, active, stale, n-50)
	})
	if len(replicas) < 2 {
		t.Errorf("the set lives on replicas %v: want several", replicas)
	}
	if again := apply(set(1, 100, n+50)); len(again.GetUnchanged()) != n-50 {
		t.Errorf("the same set again: %d unchanged, want %d (created %v, updated %v, deleted %v)", len(again.GetUnchanged()), n-50, again.GetCreated(), again.GetUpdated(), again.GetDeleted())
	}
}
