package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/refused"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestApplyCrash kills a real probed (SIGKILL) in the middle of a large
// ApplyTargets (3,000 targets: 1,000 created, 2,000 updated, 1,000
// pruned) at a random point, restarts it over the same
// bbolt data dir, and checks that the set's active targets are the old
// set or the new one, never a mix; a pruned target may be left
// terminating (its removal is drained after the restart) only with the
// new set.
func TestApplyCrash(t *testing.T) {
	iterations := 4
	if testing.Short() {
		iterations = 2
	}
	bin := buildProbed(t)
	p := &crashProcess{t: t, bin: bin, args: crashChildArgs(t, refused.Reserve(t).Addr(), t.TempDir())}
	defer p.kill()
	if _, err := p.start(); err != nil {
		t.Fatal(err)
	}
	// A new channel after each restart: the old one may sit in its
	// reconnect back-off (TRANSIENT_FAILURE), where a call fails at once.
	dial := func() *client.Client {
		conn, err := grpc.NewClient(p.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()), crashReconnect)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return client.New(conn)
	}
	c := dial()
	ctx := t.Context()

	selector := map[string]string{"set": "crash"}
	// Generation g: s-(1000g)..s-(1000g+2999), labelled gen=g: the next
	// generation updates 2,000 names (gen changes), creates 1,000 and
	// prunes 1,000.
	set := func(g int) client.TargetSet {
		s := client.TargetSet{Owner: "crash-test", Selector: selector}
		for i := 1000 * g; i < 1000*g+3000; i++ {
			s.Targets = append(s.Targets, &probev1.Target{Name: fmt.Sprintf("ns/s-%05d", i), Labels: map[string]string{"set": "crash", "gen": fmt.Sprint(g)}})
		}
		return s
	}
	began := time.Now()
	if _, err := c.ApplyTargets(ctx, set(0)); err != nil {
		t.Fatal(err)
	}
	full := time.Since(began)
	t.Logf("a first apply of 3,000 targets took %v", full)

	gen := 0
	for it := range iterations {
		next := gen + 1
		done := make(chan error, 1)
		go func() {
			_, err := c.ApplyTargets(ctx, set(next))
			done <- err
		}()
		// A random point of the apply, in real time: the kill is meant to
		// land anywhere in it (no event to wait for).
		time.Sleep(time.Duration(rand.Int64N(int64(2*full) + 1)))
		p.kill()
		applied := <-done
		if _, err := p.start(); err != nil {
			t.Fatal(err)
		}
		c = dial()
		all, err := c.ListAll(ctx, selector)
		if err != nil {
			t.Fatal(err)
		}
		var active []string
		gens := make(map[string]bool)
		for _, tg := range all {
			if tg.GetStatus().GetPhase() == probev1.Phase_PHASE_TERMINATING {
				continue
			}
			active = append(active, tg.GetName())
			gens[tg.GetLabels()["gen"]] = true
		}
		names := func(g int) []string {
			var out []string
			for _, tg := range set(g).Targets {
				out = append(out, tg.GetName())
			}
			return out
		}
		switch {
		case slices.Equal(active, names(gen)) && len(gens) == 1 && gens[fmt.Sprint(gen)]:
			t.Logf("iteration %d: killed before the commit (the call: %v): the old set", it, applied)
		case slices.Equal(active, names(next)) && len(gens) == 1 && gens[fmt.Sprint(next)]:
			t.Logf("iteration %d: killed after the commit (the call: %v): the new set", it, applied)
			gen = next
		default:
			t.Fatalf("iteration %d: after the kill, %d active targets of generations %v: neither the old set (gen %d) nor the new one (gen %d)", it, len(active), gens, gen, next)
		}
		if applied == nil && gen != next {
			t.Fatalf("iteration %d: the call succeeded but the old set is stored", it)
		}
	}
}
