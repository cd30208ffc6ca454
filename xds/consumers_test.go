package xds_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/xds"
)

// TestConsumersAddNoProbes: a target is probed once per period however
// many consumers follow it. On a fake clock, four targets of one service
// (a 10 ms period) are probed exactly once per period over five periods
// without consumers, and again exactly once per period over five more
// with 20 xDS streams subscribed to the service and 20 Watch streams
// open, opened while the clock stood still and following a transition
// (a target turning unready: a push to every stream and an event to
// every watcher). The counts are the backends' (requests received) and
// the engine's (probes run), which must agree.
func TestConsumersAddNoProbes(t *testing.T) {
	const (
		targets   = 4
		consumers = 20
		periods   = 5
		period    = 10 * time.Millisecond // httpTarget's
	)
	clock := clockwork.NewFakeClock()
	p := startXDS(t, setup{clock: clock})
	backends := make([]*probedtest.Backend, targets)
	names := make([]string, targets)
	for i := range backends {
		backends[i] = probedtest.NewBackend(t, true)
		names[i] = "ns/t-" + strconv.Itoa(i)
		p.create(t, httpTarget(names[i], backends[i].Port(), service("svc")))
	}
	// counts returns what each backend received and the engine ran.
	counts := func() (got, ran []int) {
		for i, b := range backends {
			n, _ := b.Requests("")
			got = append(got, n)
			tg, err := p.eng.Get(context.Background(), names[i])
			if err != nil {
				t.Fatal(err)
			}
			ran = append(ran, int(tg.Status.Probes[probe.Readiness].ProbesTotal))
		}
		return got, ran
	}
	// settle waits until every target was probed want times, the engine
	// agreeing, and nothing is in flight; then none may have more.
	settle := func(want int) {
		t.Helper()
		poll.Until(t, fmt.Sprintf("%d probes of every target", want), 10*time.Second, func() bool {
			got, ran := counts()
			for i := range got {
				if got[i] < want || ran[i] < want {
					return false
				}
			}
			return p.eng.Stats().Inflight == 0
		})
		got, ran := counts()
		for i := range got {
			if got[i] != want || ran[i] != want {
				t.Fatalf("%s: the backend got %d probes and the engine ran %d, want %d (one per period)", names[i], got[i], ran[i], want)
			}
		}
	}
	// periodsPass moves the clock on by n periods, one at a time, and
	// checks that each brought exactly one probe of every target.
	probes := 1 // the first, at creation
	settle(probes)
	periodsPass := func(n int) {
		t.Helper()
		for range n {
			clock.Advance(period)
			probes++
			settle(probes)
		}
	}
	periodsPass(periods)

	// Consumers: xDS streams subscribed to the service, acknowledging
	// what they get, and Watch streams of its targets.
	for i := range consumers {
		c := dialADS(t, p.addr, "consumer-"+strconv.Itoa(i))
		for _, typ := range []string{xds.ListenerType, xds.ClusterType, xds.EndpointType} {
			c.request(typ, []string{"svc.ns"}, "", "", "")
			c.ack(c.next(), "svc.ns")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var watching sync.WaitGroup
	defer watching.Wait()
	defer cancel()
	for range consumers {
		w, err := p.eng.Watch(ctx, engine.WatchOptions{Selector: service("svc")})
		if err != nil {
			t.Fatal(err)
		}
		watching.Go(func() {
			defer w.Close()
			for {
				if _, err := w.Next(ctx); err != nil {
					return
				}
			}
		})
	}
	settle(probes) // opening them probed nothing
	backends[0].SetHealthy(false)
	periodsPass(periods)
	p.waitReady(t, false, names[0])
	if st := p.srv.Stats(); st.Streams != consumers {
		t.Errorf("%d xDS streams open, want %d", st.Streams, consumers)
	}
}
