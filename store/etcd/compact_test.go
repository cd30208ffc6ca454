package etcd_test

import (
	"context"
	"errors"
	"testing"

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
	s := open(t, c.Client(t), etcd.Options{ReplicaID: "a"})
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
		err := other.Follow(t.Context(), after, func(uint64, []*engine.Change) {})
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
	s := open(t, c.Client(t), etcd.Options{ReplicaID: "a"})
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
	s := open(t, c.Client(t), etcd.Options{ReplicaID: "a", Leading: func() bool { return leading }})
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
