package cluster_test

import (
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
	a.feed = startFeed(t, e.etcd.Client(t), e.prefix, "a", a.c)
	e.waitOwners(cluster.Desired([]string{"a", "b"}, e.shards), a, b)
	if !a.log.has("reloaded the member and shard keys") {
		t.Error("a did not say it reloaded its view")
	}
	e.probing.check(t)
}
