package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/etcd"
)

// TestLeaderLoss: a three-member etcd loses its leader (killed, no
// handover) in the middle of a stream of commits: every Commit succeeds,
// exactly once (the history has each change once, at the revision its
// Commit gave it), and a Follow on another replica delivers the whole
// history in order, through the election.
func TestLeaderLoss(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("an etcd election: a few seconds")
	}
	c := etcdtest.StartCluster(t, 3, etcdtest.Options{TickMs: 20, ElectionMs: 200})
	// The real clock: the backoff waits out etcd's real election.
	real := clockwork.NewRealClock()
	w := open(t, c.Client(t), etcd.Options{ReplicaID: "writer", Clock: real, RequestTimeout: time.Second, Logger: testLogger(t)})
	r := open(t, c.Client(t), etcd.Options{ReplicaID: "reader", Clock: real, RequestTimeout: time.Second})
	f := follow(t, r, load(t, r).Revision)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const commits, killAt = 40, 15
	var committed []*engine.Change
	for i := range commits {
		if i == killAt {
			leader, err := c.WaitLeader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c.Kill(leader)
		}
		cr := create(fmt.Sprintf("t%02d", i))
		batch := []*engine.Change{cr, transition(cr, 1)}
		if err := w.Commit(ctx, batch); err != nil {
			t.Fatalf("Commit %d (leader killed before commit %d): %v", i, killAt, err)
		}
		committed = append(committed, batch...)
	}
	last := committed[len(committed)-1].Event.Revision
	f.waitFor(last)

	replay := load(t, open(t, c.Client(t), etcd.Options{ReplicaID: "check"})).Events
	if len(replay) != len(committed) {
		t.Fatalf("history has %d events, want %d (one per change committed)", len(replay), len(committed))
	}
	for i, ev := range replay {
		if want := committed[i]; ev.Revision != want.Event.Revision || ev.Name != want.Name || ev.Kind != want.Event.Kind {
			t.Errorf("event %d: %s %s at %d, want %s %s at %d", i, ev.Kind, ev.Name, ev.Revision, want.Event.Kind, want.Name, want.Event.Revision)
		}
	}
	if diff := cmp.Diff(replay, f.events(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("the reader's Follow differs from the history (-history +followed):\n%s", diff)
	}
}

// TestLeaderLossStallsWritesBriefly: when etcd's leader is killed under a
// writer whose requests go to a follower (etcd's default timing: 1 s
// election timeout), no Commit waits out the 5 s request timeout: the
// transaction in flight, which no one will answer, is sent again after
// the attempt timeout (1 s), and writes resume about when the new leader
// exists.
func TestLeaderLossStallsWritesBriefly(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("an etcd election: a few seconds")
	}
	c := etcdtest.StartCluster(t, 3, etcdtest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	follower := (leader + 1) % 3
	cli := etcdtest.ClientOf(t, c.Endpoints()[follower])
	w := open(t, cli, etcd.Options{ReplicaID: "writer", Clock: clockwork.NewRealClock()})
	var slowest time.Duration
	for i := range 30 {
		if i == 10 {
			c.Kill(leader)
		}
		cr := create(fmt.Sprintf("t%02d", i))
		began := time.Now()
		if err := w.Commit(ctx, []*engine.Change{cr}); err != nil {
			t.Fatalf("Commit %d: %v", i, err)
		}
		slowest = max(slowest, time.Since(began))
		// A steady trickle of writes in real time, so that some are in
		// flight while the election runs (its timing is etcd's own, on
		// the real clock: there is no event to pace the writes by).
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the slowest Commit through the election took %v", slowest.Round(time.Millisecond))
	if bound := 4 * time.Second; slowest >= bound {
		t.Errorf("a Commit took %v through the election, want less than %v (not the %v request timeout)", slowest, bound, etcd.DefaultRequestTimeout)
	}
}
