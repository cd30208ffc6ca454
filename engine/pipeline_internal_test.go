package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/internal/poll"
)

// gatedStore is a PipelinedStore whose Commits wait for the test: each is
// announced on arrived and ends with the error the test answers; one
// answered nil is applied then (its revisions are assigned in the order
// the test answers, as etcd orders the transactions in flight at once).
type gatedStore struct {
	stubStore
	arrived chan *gatedCommit
	mu      sync.Mutex
	all     []*gatedCommit // guarded by mu
}

// gatedCommit is one Commit waiting for the test's answer.
type gatedCommit struct {
	changes []*Change
	answer  chan error
}

func newGatedStore() *gatedStore {
	return &gatedStore{arrived: make(chan *gatedCommit, 16)}
}

func (*gatedStore) CommitsInFlight() int { return 8 }

// BatchLimits: two changes a Commit, so that two make a full batch.
func (*gatedStore) BatchLimits() (int, int)   { return 2, 1 << 20 }
func (*gatedStore) ChangeBytes(c *Change) int { return len(c.Name) }

func (s *gatedStore) Commit(ctx context.Context, changes []*Change) error {
	g := &gatedCommit{changes: changes, answer: make(chan error, 1)}
	s.mu.Lock()
	s.all = append(s.all, g)
	s.mu.Unlock()
	s.arrived <- g
	if err := <-g.answer; err != nil {
		return err
	}
	return s.stubStore.Commit(ctx, changes)
}

// names is the commit's targets, in order.
func (g *gatedCommit) names() string {
	var names []string
	for _, c := range g.changes {
		names = append(names, c.Name)
	}
	return strings.Join(names, " ")
}

// next returns the next Commit to arrive.
func (s *gatedStore) next(t *testing.T) *gatedCommit {
	t.Helper()
	select {
	case g := <-s.arrived:
		return g
	case <-time.After(10 * time.Second):
		t.Fatal("no Commit arrived within 10s")
		return nil
	}
}

// gatedCommitter runs a committer over store with inFlight commits at
// once, on clock, its feed following the store as the engine's follow
// loop makes it.
func gatedCommitter(t *testing.T, store *gatedStore, clock clockwork.Clock, inFlight int) *committer {
	f := newFeed(100, 0)
	c := newCommitter(store, f, clock, func([]*Change, time.Duration) {})
	c.inFlight = inFlight
	store.log.Start()
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan error, 1)
	go func() {
		followed <- store.Follow(ctx, 0, func(d Delivery) {
			f.publish(d.Changes)
			f.reach(d.Pos)
		})
	}()
	ran := make(chan error, 1)
	go func() { ran <- c.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		// Answer every Commit (those of a failed test, and the flush on
		// stop), until run ends.
		for {
			store.mu.Lock()
			for _, g := range store.all {
				select {
				case g.answer <- nil:
				default:
				}
			}
			store.mu.Unlock()
			select {
			case <-store.arrived:
				continue
			case <-time.After(10 * time.Millisecond):
				continue
			case err := <-ran:
				if err != nil {
					t.Error(err)
				}
			}
			break
		}
		if err := <-followed; err != nil {
			t.Error(err)
		}
	})
	return c
}

// change returns a change of the target named name.
func change(name string) *Change {
	return &Change{Name: name, Target: &Target{Spec: nameOnly(name)}}
}

// submitted submits changes as one unit.
func submitted(t *testing.T, c *committer, changes ...*Change) <-chan error {
	t.Helper()
	done, err := c.submit(changes, true)
	if err != nil {
		t.Fatal(err)
	}
	return done
}

// told waits for done's outcome.
func told(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no outcome within 10s")
		return nil
	}
}

// TestCommitterPipelines: a full batch goes to the store while another is
// in flight, never with a change of a target in flight (it waits, in its
// order) nor split from its unit; a batch that is not full waits for the
// one in flight. With a1 in flight, a2 and the unit {c, a3} wait, d alone
// waits too, and d and e, a full batch (two changes), go beside a1 (with
// one Commit in flight at a time they do not: the test fails); the store
// applies them first. Then a2 goes alone (with {c, a3} it would exceed
// the limits), and {c, a3}, whole, once a2 is applied: a's revisions
// follow its submissions.
func TestCommitterPipelines(t *testing.T) {
	store := newGatedStore()
	c := gatedCommitter(t, store, clockwork.NewFakeClock(), 4)
	a1, a2, c1, a3, d1, e1 := change("a"), change("a"), change("c"), change("a"), change("d"), change("e")
	doneA1 := submitted(t, c, a1)
	first := store.next(t)
	if got := first.names(); got != "a" {
		t.Fatalf("first Commit %q, want \"a\"", got)
	}
	dones := []<-chan error{submitted(t, c, a2), submitted(t, c, c1, a3)}
	doneD, doneE := submitted(t, c, d1), submitted(t, c, e1)
	second := store.next(t)
	if got := second.names(); got != "d e" {
		t.Fatalf("second Commit %q beside a's, want \"d e\" (a's next changes, and their unit, wait)", got)
	}
	second.answer <- nil
	for _, done := range []<-chan error{doneD, doneE} {
		if err := told(t, done); err != nil {
			t.Fatal(err)
		}
	}
	first.answer <- nil
	if err := told(t, doneA1); err != nil {
		t.Fatal(err)
	}
	third := store.next(t)
	if got := third.names(); got != "a" {
		t.Fatalf("third Commit %q, want \"a\" (a2 alone: its unit and the next exceed the limits)", got)
	}
	third.answer <- nil
	fourth := store.next(t)
	if got := fourth.names(); got != "c a" {
		t.Fatalf("fourth Commit %q, want \"c a\" (the unit, whole, after a2)", got)
	}
	fourth.answer <- nil
	for _, done := range dones {
		if err := told(t, done); err != nil {
			t.Fatal(err)
		}
	}
	revs := []uint64{d1.Event.Revision, e1.Event.Revision, a1.Event.Revision, a2.Event.Revision, c1.Event.Revision, a3.Event.Revision}
	if !slices.IsSorted(revs) || revs[0] == 0 {
		t.Errorf("revisions d, e, a1, a2, c, a3 = %v, want increasing", revs)
	}
}

// TestCommitterHoldsAmongCommitsInFlight: the store cannot write (an
// error wrapping ErrUnavailable) a batch while another is in flight. The
// held batch keeps its place before a's next change, which waits behind
// it; the committer takes nothing more (neither a's next change nor new
// ones) until the retry is due on the engine's clock, 50 ms after the
// first failure — the other batch failing too does not move it — and
// then retries the first held batch alone; once it is written, the rest
// goes, a's changes in order. Stalled's clock (writing) is the oldest
// Commit in flight's.
func TestCommitterHoldsAmongCommitsInFlight(t *testing.T) {
	store := newGatedStore()
	clock := clockwork.NewFakeClock()
	c := gatedCommitter(t, store, clock, 4)
	t0 := clock.Now()
	a1, b1, x1, a2, c1, y1 := change("a"), change("b"), change("x"), change("a"), change("c"), change("y")
	dones := []<-chan error{submitted(t, c, a1)}
	first := store.next(t)
	clock.Advance(time.Second)
	dones = append(dones, submitted(t, c, b1), submitted(t, c, x1))
	second := store.next(t)
	if first.names() != "a" || second.names() != "b x" {
		t.Fatalf("Commits in flight %q and %q, want \"a\" and \"b x\"", first.names(), second.names())
	}
	writing := func(want time.Time) {
		t.Helper()
		poll.UntilMet(t, "writing", 10*time.Second, func() string {
			got := c.writing.Load()
			if (want.IsZero() && got == 0) || (!want.IsZero() && got == want.UnixNano()) {
				return ""
			}
			return fmt.Sprintf("writing %d, want %v", got, want)
		})
	}
	writing(t0)
	dones = append(dones, submitted(t, c, a2))
	full := fmt.Errorf("disk full: %w", ErrUnavailable)
	first.answer <- full
	writing(t0.Add(time.Second)) // b's and x's, now the oldest in flight
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err) // the retry's timer
	}
	if !errors.Is(c.unavailable(), ErrUnavailable) {
		t.Errorf("unavailable() = %v while held, want ErrUnavailable", c.unavailable())
	}
	dones = append(dones, submitted(t, c, c1), submitted(t, c, y1))
	second.answer <- full
	writing(time.Time{})
	clock.Advance(minHoldRetry)
	retry := store.next(t)
	if got := retry.names(); got != "b x" {
		t.Fatalf("Commit %q after the hold, want \"b x\" (the first held batch, alone)", got)
	}
	retry.answer <- nil
	// Then two full batches at once, in either order.
	var rest []string
	for range 2 {
		g := store.next(t)
		rest = append(rest, g.names())
		g.answer <- nil
	}
	slices.Sort(rest)
	if got := strings.Join(rest, ", "); got != "a a, c y" {
		t.Fatalf("Commits %s once written again, want a a (a's changes in order, together) and c y", got)
	}
	for _, done := range dones {
		if err := told(t, done); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.unavailable(); err != nil {
		t.Errorf("unavailable() = %v once written, want nil", err)
	}
	if a1.Event.Revision >= a2.Event.Revision {
		t.Errorf("a1 at %d, a2 at %d: want a1 first", a1.Event.Revision, a2.Event.Revision)
	}
}
