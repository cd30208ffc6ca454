package cluster_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/cluster"
	"github.com/probed/probed/internal/etcdtest"
)

// TestRenewalDoesNotWaitForAHeartbeat (issue 22, item 8): the heartbeats
// run beside the renewals, so a renewal is sent at its tick while a
// heartbeat is still under way, on the strength of the last one (which
// succeeded less than TTL/3 before). Once the last success is TTL/3 old
// and the heartbeat under way has failed (it timed out), the renewal is
// skipped: a replica that makes no progress still stops renewing (item 6).
func TestRenewalDoesNotWaitForAHeartbeat(t *testing.T) {
	clock := clockwork.NewFakeClock()
	e := newEnv(t, etcdtest.Start(t), clock, 16)
	const ttl = time.Minute // the harness's: a heartbeat every 10 s, a renewal every 20 s
	var (
		slow    atomic.Bool
		entered = make(chan struct{}, 1)
		beats   atomic.Int64
	)
	a := e.start("a", func(o *cluster.Options) {
		o.Heartbeat = func(ctx context.Context) error {
			beats.Add(1)
			if !slow.Load() {
				return nil
			}
			select {
			case entered <- struct{}{}:
			default:
			}
			<-ctx.Done() // a scheduler that does not get to the timer
			return ctx.Err()
		}
	})
	e.waitOwners(cluster.Desired([]string{"a"}, e.shards), a)
	// The join's heartbeat, then one TTL/6 later.
	clock.Advance(ttl / 6)
	waitFor(t, "the second heartbeat", func() string {
		if n := beats.Load(); n < 2 {
			return fmt.Sprintf("%d heartbeats", n)
		}
		return ""
	})
	slow.Store(true)
	// The renewal's tick, and a heartbeat that does not return.
	clock.Advance(ttl / 6)
	<-entered
	waitRenewals(t, 1, a)
	if st := a.c.Stats(); st.RenewalsSkipped != 0 {
		t.Fatalf("a renewal skipped while the heartbeats succeed: %+v", st)
	}
	// The heartbeat times out (TTL/3) at the next tick, when the last
	// success is TTL/3 old: no renewal.
	clock.Advance(ttl / 3)
	waitFor(t, "a skipped renewal", func() string {
		if st := a.c.Stats(); st.RenewalsSkipped != 1 || st.Renewals != 1 {
			return fmt.Sprintf("%+v", st)
		}
		return ""
	})
}
