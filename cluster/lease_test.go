package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/cluster"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/poll"
)

// A replica whose heartbeat fails stops renewing its lease, and once it
// has not renewed it for a TTL (by its clock) stops probing every shard
// at once; the others take them over, never while it still probes them.
// When its heartbeat succeeds again it rejoins with a new lease and,
// once settled, owns shards again. The fake clock drives renewals and the
// watchdog; the lease is long, so that etcd expires nothing by itself.
func TestStuckReplicaLosesItsShards(t *testing.T) {
	clock := clockwork.NewFakeClock()
	e := newEnv(t, etcdtest.Start(t), clock, 512)
	const (
		ttl    = time.Minute      // the harness's
		settle = 30 * time.Second // the harness's
	)
	a, b, c := e.start("a", nil), e.start("b", nil), e.start("c", nil)
	abc := cluster.Desired([]string{"a", "b", "c"}, e.shards)
	e.waitOwners(abc, a, b, c)
	clock.Advance(ttl / 3) // every replica renews, and settles
	waitRenewals(t, 1, a, b, c)
	lease := c.c.Stats().Lease
	_, losesBefore := c.calls()

	c.stuck.Store(true)
	// Two renewals: a and b renew, c skips.
	for i := 1; i <= 2; i++ {
		clock.Advance(ttl / 3)
		waitRenewals(t, uint64(1+i), a, b)
		waitFor(t, "c to skip a renewal", func() string {
			if st := c.c.Stats(); st.RenewalsSkipped < uint64(i) || st.Renewals != 1 {
				return fmt.Sprintf("c: %+v", st)
			}
			return ""
		})
	}
	if !c.probes(slicesIndex(abc, "c")) {
		t.Fatal("c stopped probing before its lease ran out")
	}
	// A TTL less a tenth after c's last renewal its watchdog fires, and
	// c releases its shards.
	clock.Advance(ttl*9/10 - 2*ttl/3)
	waitFor(t, "c to lose its lease", func() string {
		if _, loses := c.calls(); c.c.Stats().LeaseLosses == 0 || len(loses) == len(losesBefore) {
			return "not yet"
		}
		return ""
	})
	if c.probes(slicesIndex(abc, "c")) {
		t.Error("c probes a shard after its lease ran out")
	}
	ab := cluster.Desired([]string{"a", "b"}, e.shards)
	e.waitOwners(ab, a, b)
	st := c.c.Stats()
	if st.LeaseLosses != 1 || st.Losses != uint64(count(abc, "c")) || st.Lease != 0 || st.Shards != 0 {
		t.Errorf("c after losing its lease: %+v; want 1 lease lost, %d shards lost", st, count(abc, "c"))
	}
	_, loses := c.calls()
	if loses = loses[len(losesBefore):]; len(loses) != 1 || len(loses[0].shards) != count(abc, "c") {
		t.Fatalf("c's Release calls: %+v; want one with its %d shards", loses, count(abc, "c"))
	}
	if m, ok := c.c.Owner(e.names[0]); ok || len(c.c.Members()) != 0 {
		t.Errorf("c without a lease: Owner = %+v, Members = %v; want nothing (its view is not kept)", m, c.c.Members())
	}
	if ttlResp, err := e.cli.TimeToLive(context.Background(), lease); err != nil || ttlResp.TTL != -1 {
		t.Errorf("c's old lease: %+v, %v; want revoked", ttlResp, err)
	}

	// Still stuck: c does not join again.
	clock.Advance(ttl / 3)
	e.barrier(a, b)
	if n := len(a.c.Members()); n != 2 {
		t.Fatalf("a sees %d members while c is stuck, want 2", n)
	}

	c.stuck.Store(false)
	// c joins once its back-off (at most a TTL) has passed. Step the
	// clock a tick at a time, each time until a and b have renewed, so
	// that no timeout of theirs passes while a renewal is under way.
	// Each step waits for a renewal of a and b made after the last tick
	// (counted from where they are now, not from a fixed number: a step
	// that waited for nothing would run the clock ahead of c's join).
	first := min(a.c.Stats().Renewals, b.c.Stats().Renewals)
	for n := first; ; n++ {
		waitRenewals(t, n, a, b)
		// A join this tick started runs on etcd in real time: give it a
		// second before the clock moves on (moving it on under a join in
		// flight timed the join out, and again, until the bound).
		if poll.Wait("c to join", time.Second, func() bool { return c.c.Stats().Lease != 0 }) == nil {
			break
		}
		// Its back-off is at most a TTL (3 ticks), but an attempt under
		// way when it was unstuck may still fail and back off once more;
		// the bound only ends a test that would never pass.
		if n > first+20 {
			t.Fatalf("c did not join again: %+v", c.c.Stats())
		}
		clock.Advance(ttl / 3)
	}
	e.barrier(a, b, c)
	// The clock may have moved on while c's join was under way (etcd's
	// answers are real time): c is unsettled until its join time, as a
	// and b see it, plus Settle.
	var joined time.Time
	for _, m := range a.c.Members() {
		if m.ID == "c" {
			joined = m.Joined
		}
	}
	if joined.IsZero() {
		t.Fatalf("a does not see c as a member after c joined: %v", a.c.Members())
	}
	if settled := joined.Add(settle); clock.Now().Before(settled) {
		if diff := cluster.OwnersDiff(e.owners(), ab); diff != "" {
			t.Fatalf("c took shards before it settled: %s", diff)
		}
		clock.Advance(settled.Sub(clock.Now()))
	}
	e.waitOwners(abc, a, b, c)
	e.history()
	e.probing.check(t)
}

// waitRenewals waits until each replica renewed its lease n times.
func waitRenewals(t *testing.T, n uint64, rs ...*replica) {
	t.Helper()
	waitFor(t, "renewals", func() string {
		for _, r := range rs {
			if got := r.c.Stats().Renewals; got < n {
				return fmt.Sprintf("%s renewed %d times, want %d", r.id, got, n)
			}
		}
		return ""
	})
}

// etcd expiring a replica's lease (here: revoking it) takes its shards
// away at once: the replica calls Release for every one of them and joins
// again with a new lease.
func TestLeaseGoneInEtcd(t *testing.T) {
	clock := clockwork.NewFakeClock()
	e := newEnv(t, etcdtest.Start(t), clock, 256)
	a, b := e.start("a", nil), e.start("b", nil)
	ab := cluster.Desired([]string{"a", "b"}, e.shards)
	e.waitOwners(ab, a, b)
	clock.Advance(30 * time.Second) // a and b settle, and renew
	waitRenewals(t, 1, a, b)
	old := b.c.Stats().Lease
	_, losesBefore := b.calls()
	if _, err := e.cli.Revoke(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to lose its lease and join again", func() string {
		if st := b.c.Stats(); st.LeaseLosses != 1 || st.Lease == 0 || st.Lease == old {
			return fmt.Sprintf("%+v", st)
		}
		return ""
	})
	_, loses := b.calls()
	if loses = loses[len(losesBefore):]; len(loses) != 1 || len(loses[0].shards) != count(ab, "b") {
		t.Errorf("b's Release calls: %+v; want one with its %d shards", loses, count(ab, "b"))
	}
	// b is a newcomer now, a is settled: a takes everything until b
	// settles.
	e.waitOwners(cluster.Desired([]string{"a"}, e.shards), a, b)
	clock.Advance(30 * time.Second)
	e.waitOwners(ab, a, b)
	e.history()
}

// With the real clock and etcd's real lease expiry: a replica whose
// heartbeat fails loses its shards within about a TTL, and the others
// take them over. (That it stops probing before the others start is
// checked on the fake clock above: here it depends on the replica's
// goroutines being scheduled within the margin, which a loaded machine
// does not promise; fencing covers that case.)
func TestStuckReplicaLosesItsShardsRealClock(t *testing.T) {
	e := newEnv(t, etcdtest.Start(t), clockwork.NewRealClock(), 256)
	const ttl = 2 * time.Second
	edit := func(o *cluster.Options) { o.LeaseTTL = ttl }
	a, b, c := e.start("a", edit), e.start("b", edit), e.start("c", edit)
	abc := cluster.Desired([]string{"a", "b", "c"}, e.shards)
	e.waitOwners(abc, a, b, c)

	_, losesBefore := c.calls()
	start := time.Now()
	c.stuck.Store(true)
	waitFor(t, "c to lose its shards", func() string {
		if _, loses := c.calls(); len(loses) == len(losesBefore) {
			return "no Release call"
		}
		return ""
	})
	lost := time.Since(start)
	ab := cluster.Desired([]string{"a", "b"}, e.shards)
	e.waitOwners(ab, a, b)
	t.Logf("c lost its shards %v after its heartbeat began failing (TTL %v); a and b own them %v after", lost, ttl, time.Since(start))
	st := c.c.Stats()
	if st.LeaseLosses != 1 || st.RenewalsSkipped == 0 || st.Shards != 0 {
		t.Errorf("c: %+v; want 1 lease lost, renewals skipped", st)
	}
	_, loses := c.calls()
	if lost := loses[len(losesBefore)]; len(lost.shards) != count(abc, "c") {
		t.Errorf("c lost %d shards, want %d", len(lost.shards), count(abc, "c"))
	}
	e.history()
	e.probing.mu.Lock()
	t.Logf("shards probed by two replicas for a moment: %d", len(e.probing.doubts))
	e.probing.mu.Unlock()
}

// A replica started with the ID of a live one waits for it to go (a
// restart under the same ID while the previous lease lives) and joins
// after.
func TestReplicaIDInUse(t *testing.T) {
	clock := clockwork.NewFakeClock()
	e := newEnv(t, etcdtest.Start(t), clock, 64)
	first := e.start("a", nil)
	e.waitOwners(cluster.Desired([]string{"a"}, e.shards), first)
	second := e.start("a", nil)
	waitFor(t, "the second a to be refused", func() string {
		if !second.log.has("replica ID in use by another lease") {
			return "not yet"
		}
		return ""
	})
	resp, err := e.cli.Get(context.Background(), e.prefix+"members/a")
	if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != first.c.Stats().Lease {
		t.Fatalf("member key %v, %v; want the first a's", resp.Kvs, err)
	}
	if st := second.c.Stats(); st.Lease != 0 || st.Shards != 0 {
		t.Fatalf("the second a joined while the first is a member: %+v", st)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second a to join", func() string {
		if second.c.Stats().Lease == 0 {
			clock.Advance(time.Minute / 3)
			return "not joined"
		}
		return ""
	})
	e.waitOwners(cluster.Desired([]string{"a"}, e.shards), second)
}

func slicesIndex(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}

// A heartbeat that returns nil but later than TTL/3 does not renew the
// lease either: the scheduler is too slow to be trusted with probes.
func TestLateHeartbeatSkipsTheRenewal(t *testing.T) {
	clock := clockwork.NewFakeClock()
	e := newEnv(t, etcdtest.Start(t), clock, 16)
	const ttl = time.Minute
	var late atomic.Bool
	a := e.start("a", func(o *cluster.Options) {
		o.Heartbeat = func(ctx context.Context) error {
			if late.CompareAndSwap(true, false) {
				clock.Advance(ttl/3 + time.Millisecond) // this heartbeat takes that long
			}
			return nil
		}
	})
	e.waitOwners(cluster.Desired([]string{"a"}, e.shards), a)
	clock.Advance(ttl / 3)
	waitRenewals(t, 1, a)
	late.Store(true)
	clock.Advance(ttl / 3)
	waitFor(t, "a skipped renewal", func() string {
		// (The late heartbeat's Advance lets the next tick renew again.)
		if st := a.c.Stats(); st.RenewalsSkipped != 1 || st.LeaseLosses != 0 {
			return fmt.Sprintf("%+v", st)
		}
		return ""
	})
}

// TestLeaseValidByLocalDeadline: LeaseValid turns false the moment the
// clock passes the lease's local deadline, before the watchdog had a
// chance to run (a process waking from a pause must not probe first);
// the loss calls Suspend with its cause; each join calls Resume with
// its revision, and after the rejoin the lease is valid again.
func TestLeaseValidByLocalDeadline(t *testing.T) {
	clock := clockwork.NewFakeClock()
	e := newEnv(t, etcdtest.Start(t), clock, 64)
	const ttl = time.Minute // the harness's
	var (
		mu       sync.Mutex
		suspends []error
		resumes  []int64
	)
	a := e.start("a", func(o *cluster.Options) {
		o.Suspend = func(cause error) {
			mu.Lock()
			defer mu.Unlock()
			suspends = append(suspends, cause)
		}
		o.Resume = func(_ context.Context, rev int64, _ bool) error {
			mu.Lock()
			defer mu.Unlock()
			resumes = append(resumes, rev)
			return nil
		}
	})
	calls := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(suspends), len(resumes)
	}
	e.waitOwners(cluster.Desired([]string{"a"}, e.shards), a)
	waitFor(t, "Resume after the join", func() string {
		if _, r := calls(); r != 1 {
			return fmt.Sprintf("%d Resume calls", r)
		}
		return ""
	})
	if !a.c.LeaseValid() {
		t.Fatal("LeaseValid false right after the join")
	}
	a.stuck.Store(true) // no renewal from now on
	clock.Advance(ttl * 9 / 10)
	if a.c.LeaseValid() {
		t.Fatal("LeaseValid true at the lease's local deadline")
	}
	waitFor(t, "Suspend after the loss", func() string {
		if s, _ := calls(); s != 1 {
			return fmt.Sprintf("%d Suspend calls", s)
		}
		return ""
	})
	mu.Lock()
	cause := suspends[0]
	mu.Unlock()
	if cause == nil || !strings.Contains(cause.Error(), "not renewed") {
		t.Errorf("Suspend(%v), want the cause: not renewed", cause)
	}
	a.stuck.Store(false)
	waitFor(t, "a rejoined and resumed", func() string {
		if _, r := calls(); r >= 2 {
			// No clock move from now on: the lease stays valid.
			if !a.c.LeaseValid() {
				return fmt.Sprintf("%d Resume calls, LeaseValid false", r)
			}
			return ""
		}
		clock.Advance(ttl / 3) // the backoff before the next join
		return "not resumed yet"
	})
	if _, r := calls(); r != 2 {
		t.Errorf("%d Resume calls, want 2 (the join and the rejoin)", r)
	}
}
