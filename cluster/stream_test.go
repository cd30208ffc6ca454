package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/cluster"
	"github.com/probed/probed/internal/etcdtest"
)

// The view follows the store's follow (Observe), the replica's one etcd
// watch. When that follow starts again past revisions the view has not
// seen (the engine reloaded its view after a compaction), the view
// reloads the keys from etcd: a replica whose follow missed another's
// join hands that one its shards all the same.
func TestViewReloadsAfterAGapInTheStream(t *testing.T) {
	e := newEnv(t, etcdtest.Start(t), clockwork.NewRealClock(), 64)
	a := e.start("a", nil)
	e.waitOwners(cluster.Desired([]string{"a"}, e.shards), a)

	a.feed() // a's view stops here
	b := e.start("b", nil)
	waitFor(t, "b to be a member", func() string {
		for _, m := range b.c.Members() {
			if m.ID == "b" {
				return ""
			}
		}
		return "not yet"
	})
	if got := len(a.c.Members()); got != 1 {
		t.Fatalf("a's view has %d members without its follow, want 1", got)
	}
	// Followed again from etcd's revision now: b's join is behind it.
	a.feed = a.startFeed()
	e.waitOwners(cluster.Desired([]string{"a", "b"}, e.shards), a, b)
	if !a.log.has("reloaded the member and shard keys") {
		t.Error("a did not say it reloaded its view")
	}
	e.probing.check(t)
}

// Ownership follows the stream: a shard key deleted behind its owner's
// back (etcdctl) is dropped when the replica's stream brings the delete —
// no Release (nothing to flush: the fence refuses its writes) — and the
// shard, claimed again, is gained at the new claim's revision.
func TestStreamDropsAndGainsAShard(t *testing.T) {
	e := newEnv(t, etcdtest.Start(t), clockwork.NewRealClock(), 16)
	a := e.start("a", nil)
	e.waitOwners(cluster.Desired([]string{"a"}, e.shards), a)
	waitFor(t, "a to gain every shard", func() string {
		gains, _ := a.calls()
		n := 0
		for _, g := range gains {
			n += len(g.shards)
		}
		if n != e.shards {
			return fmt.Sprintf("%d shards gained", n)
		}
		return ""
	})
	gainsBefore, losesBefore := a.calls()
	resp, err := e.cli.Delete(context.Background(), e.prefix+"shards/0003")
	if err != nil || resp.Deleted != 1 {
		t.Fatalf("delete shard 3's key: %v (%d deleted)", err, resp.Deleted)
	}
	waitFor(t, "a to drop shard 3, then gain it again", func() string {
		gains, _ := a.calls()
		if drops := a.dropped(); len(drops) != 1 || !slices.Equal(drops[0], []int{3}) {
			return fmt.Sprintf("drops %v", drops)
		}
		if gains = gains[len(gainsBefore):]; len(gains) != 1 || !slices.Equal(gains[0].shards, []int{3}) {
			return fmt.Sprintf("gains since %+v", gains)
		}
		if gains[0].rev <= resp.Header.Revision {
			return fmt.Sprintf("gained at %d, the delete was at %d", gains[0].rev, resp.Header.Revision)
		}
		return ""
	})
	if _, loses := a.calls(); len(loses) != len(losesBefore) {
		t.Errorf("Release calls after the delete: %+v; want none", loses[len(losesBefore):])
	}
	if !a.probes(3) {
		t.Error("a does not probe shard 3 after claiming it again")
	}
	e.probing.check(t)
}
