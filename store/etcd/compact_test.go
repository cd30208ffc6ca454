package etcd_test

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/etcd"
)

// history commits a create then n transitions of it, one transaction
// each, and returns the changes.
func history(t *testing.T, s *etcd.Store, n int) []*engine.Change {
	t.Helper()
	c := create("web")
	commit(t, s, c)
	out := []*engine.Change{c}
	for i := 1; i <= n; i++ {
		c = transition(c, i)
		commit(t, s, c)
		out = append(out, c)
	}
	return out
}

// TestCompactThenLoadAndFollow: after Compact(before), Load returns the
// events from before, Compacted says where etcd cut, and a Follow from
// before the cut fails with ErrCompacted naming the oldest revision kept,
// whether it needs the specs at its start (no Load) or not.
func TestCompactThenLoadAndFollow(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	s := open(t, c.Client(t), etcd.Options{ReplicaID: "a", Compact: true})
	cs := history(t, s, 5)
	before := cs[3].Event.Revision
	if err := s.Compact(t.Context(), before); err != nil {
		t.Fatalf("Compact(%d) = %v", before, err)
	}
	st := load(t, s)
	if len(st.Events) != 3 || st.Events[0].Revision != before {
		t.Errorf("after Compact: events %v, want 3 from %d", revisions(st.Events), before)
	}
	if want := before - 1; st.Compacted != want {
		t.Errorf("Compacted = %d, want %d (below etcd's compaction revision)", st.Compacted, want)
	}
	for _, after := range []uint64{0, cs[1].Event.Revision | 1023} {
		other := open(t, c.Client(t), etcd.Options{ReplicaID: "b"})
		err := other.Follow(t.Context(), after, func(engine.Delivery) {})
		var ce *engine.CompactedError
		if !errors.Is(err, engine.ErrCompacted) || !errors.As(err, &ce) || ce.Oldest != before {
			t.Errorf("Follow(%d) after the compaction = %v, want an *engine.CompactedError with Oldest %d", after, err, before)
		}
	}
	f := follow(t, s, st.Revision) // from the Load: fine
	last := transition(cs[5], 6)
	commit(t, s, last)
	f.waitFor(last.Event.Revision)
}

// TestCompactWholeTransactions: etcd compacts whole transactions: one
// with an event at or above before stays whole; one whose events are all
// below before goes, unless it is etcd's newest revision.
func TestCompactWholeTransactions(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	s := open(t, c.Client(t), etcd.Options{ReplicaID: "a", Compact: true})
	web, db := create("web"), create("db")
	commit(t, s, web, db)
	tr := transition(web, 1)
	commit(t, s, tr)

	mustCompact(t, s, db.Event.Revision) // inside the first transaction
	if st := load(t, s); len(st.Events) != 3 {
		t.Errorf("Compact inside a transaction deleted some of it: events %v", revisions(st.Events))
	}
	mustCompact(t, s, tr.Event.Revision+1) // past the newest transaction
	if st := load(t, s); len(st.Events) != 1 || st.Events[0].Revision != tr.Event.Revision {
		t.Errorf("after Compact past the newest transaction: events %v, want only it (etcd's current revision)", revisions(st.Events))
	}
	tr2 := transition(tr, 2)
	commit(t, s, tr2)
	mustCompact(t, s, tr.Event.Revision+1) // now a later revision exists
	if st := load(t, s); len(st.Events) != 1 || st.Events[0].Revision != tr2.Event.Revision {
		t.Errorf("after Compact past a transaction that is no longer the newest: events %v, want %d", revisions(st.Events), tr2.Event.Revision)
	}
	mustCompact(t, s, tr.Event.Revision) // compacted already: no error
}

func mustCompact(t *testing.T, s *etcd.Store, before uint64) {
	t.Helper()
	if err := s.Compact(t.Context(), before); err != nil {
		t.Fatalf("Compact(%d) = %v", before, err)
	}
}

// TestCompactOnlyLeading: a replica that does not lead compacts nothing.
func TestCompactOnlyLeading(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	leading := false
	s := open(t, c.Client(t), etcd.Options{ReplicaID: "a", Compact: true, Leading: func() bool { return leading }})
	cs := history(t, s, 3)
	mustCompact(t, s, cs[3].Event.Revision)
	if st := load(t, s); len(st.Events) != 4 || st.Compacted != 0 {
		t.Errorf("a replica that does not lead compacted: events %v, compacted %d", revisions(st.Events), st.Compacted)
	}
	leading = true
	mustCompact(t, s, cs[3].Event.Revision)
	if st := load(t, s); len(st.Events) != 1 {
		t.Errorf("the leader did not compact: events %v", revisions(st.Events))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(context.Background(), 1); !errors.Is(err, etcd.ErrClosed) {
		t.Errorf("Compact after Close = %v, want ErrClosed", err)
	}
}

// TestCompactOffByDefault: without Options.Compact nothing is compacted
// (etcd compaction is global): a foreign client's watch of its own prefix
// from an early revision still gets its history.
func TestCompactOffByDefault(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	cli := c.Client(t)
	foreign, err := cli.Put(t.Context(), "/other-app/config", "v1")
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, cli, etcd.Options{ReplicaID: "a"})
	cs := history(t, s, 3)
	mustCompact(t, s, cs[3].Event.Revision)
	if st := load(t, s); len(st.Events) != 4 || st.Compacted != 0 {
		t.Errorf("compaction is off by default, but: events %v, compacted %d", revisions(st.Events), st.Compacted)
	}
	wctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp := <-cli.Watch(wctx, "/other-app/", clientv3.WithPrefix(), clientv3.WithRev(foreign.Header.Revision))
	if resp.CompactRevision != 0 || resp.Err() != nil || len(resp.Events) != 1 {
		t.Errorf("a foreign watch from revision %d: compacted at %d, err %v, %d events; want its one event", foreign.Header.Revision, resp.CompactRevision, resp.Err(), len(resp.Events))
	}
}

// TestCompactNotBelowReplicas: with Options.Compact the leader compacts
// no lower than the oldest revision another live member still needs, and
// nothing while a live member has not said what it needs; a replica that
// is no longer a member does not hold compaction back.
func TestCompactNotBelowReplicas(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	cli := c.Client(t)
	leader := open(t, cli, etcd.Options{ReplicaID: "a", Compact: true})
	follower := open(t, cli, etcd.Options{ReplicaID: "b", Compact: true, Leading: func() bool { return false }})
	for _, id := range []string{"a", "b"} {
		if _, err := cli.Put(t.Context(), etcd.DefaultPrefix+"members/"+id, "{}"); err != nil {
			t.Fatal(err)
		}
	}
	cs := history(t, leader, 6)

	mustCompact(t, leader, cs[5].Event.Revision)
	if st := load(t, leader); len(st.Events) != 7 {
		t.Errorf("compacted while member b had not said what it needs: events %v", revisions(st.Events))
	}
	mustCompact(t, follower, cs[2].Event.Revision) // b needs from cs[2]
	if st := load(t, follower); len(st.Events) != 7 {
		t.Errorf("a replica that does not lead compacted: events %v", revisions(st.Events))
	}
	mustCompact(t, leader, cs[5].Event.Revision)
	if st := load(t, leader); len(st.Events) != 5 || st.Events[0].Revision != cs[2].Event.Revision {
		t.Errorf("after the leader's Compact(%d) with b needing %d: events %v, want 5 from %d", cs[5].Event.Revision, cs[2].Event.Revision, revisions(st.Events), cs[2].Event.Revision)
	}
	if _, err := cli.Delete(t.Context(), etcd.DefaultPrefix+"members/b"); err != nil {
		t.Fatal(err)
	}
	mustCompact(t, leader, cs[5].Event.Revision)
	if st := load(t, leader); len(st.Events) != 2 || st.Events[0].Revision != cs[5].Event.Revision {
		t.Errorf("b left; after Compact(%d): events %v, want 2 from it", cs[5].Event.Revision, revisions(st.Events))
	}
}
