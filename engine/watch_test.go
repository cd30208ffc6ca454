package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// makeEvents creates n targets (one CREATED event each) and returns the
// revisions of their events.
func makeEvents(t *testing.T, h *harness, prefix string, n int, labels map[string]string) []uint64 {
	t.Helper()
	var revs []uint64
	for i := range n {
		tg := h.create(&target.Spec{Name: fmt.Sprintf("%s-%d", prefix, i), Labels: labels})
		revs = append(revs, tg.Status.Revision)
	}
	return revs
}

// collect reads from w until it has n events (and fails after 10s).
func collect(t *testing.T, w *engine.Watcher, n int) []engine.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []engine.Event
	for len(out) < n {
		b, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %d of %d events: %v", len(out), n, err)
		}
		out = append(out, b.Events...)
	}
	return out
}

func TestWatchResumesAtEveryPosition(t *testing.T) {
	h := newHarness(t)
	revs := makeEvents(t, h, "a", 12, nil)
	for i, from := range revs {
		t.Run(fmt.Sprint("from ", from), func(t *testing.T) {
			w, err := h.eng.Watch(context.Background(), engine.WatchOptions{Since: from})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			got := collect(t, w, len(revs)-i)
			for j, ev := range got {
				if ev.Revision != revs[i+j] {
					t.Fatalf("event %d has revision %d, want %d (history %v)", j, ev.Revision, revs[i+j], revs)
				}
			}
			// The seam: the next event is the next live one, once.
			live := h.create(&target.Spec{Name: fmt.Sprintf("live-%d", i)})
			ev := collect(t, w, 1)
			if len(ev) != 1 || ev[0].Revision != live.Status.Revision {
				t.Fatalf("after the replay got %+v, want only the live event %d", ev, live.Status.Revision)
			}
			revs = append(revs, live.Status.Revision)
		})
	}
}

func TestWatchCompacted(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) { o.History = 5 })
	revs := makeEvents(t, h, "a", 10, nil)
	_, err := h.eng.Watch(context.Background(), engine.WatchOptions{Since: revs[0]})
	var compacted *engine.CompactedError
	if !errors.As(err, &compacted) || !errors.Is(err, engine.ErrCompacted) {
		t.Fatalf("Watch from a compacted revision: %v, want a CompactedError", err)
	}
	if compacted.Oldest != revs[5] {
		t.Errorf("oldest retained = %d, want %d", compacted.Oldest, revs[5])
	}
	w, err := h.eng.Watch(context.Background(), engine.WatchOptions{Since: compacted.Oldest})
	if err != nil {
		t.Fatalf("Watch from the oldest retained revision: %v", err)
	}
	defer w.Close()
	if got := collect(t, w, 5); got[0].Revision != revs[5] || got[4].Revision != revs[9] {
		t.Errorf("replay = %d..%d, want %d..%d", got[0].Revision, got[4].Revision, revs[5], revs[9])
	}
}

func TestWatchSnapshot(t *testing.T) {
	h := newHarness(t)
	makeEvents(t, h, "a", 300, nil) // more than one snapshot batch
	rev := h.eng.Revision()
	w, err := h.eng.Watch(context.Background(), engine.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Changes after the snapshot was taken are live events, not part of it.
	h.create(&target.Spec{Name: "after"})
	ctx := context.Background()
	seen := 0
	for {
		b, err := w.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !b.Snapshot || b.Revision != rev {
			t.Fatalf("snapshot batch %+v, want snapshot at revision %d", b, rev)
		}
		for _, ev := range b.Events {
			if ev.Kind != engine.KindSnapshot || ev.Target == nil || ev.Name == "after" {
				t.Fatalf("snapshot event %+v", ev)
			}
		}
		seen += len(b.Events)
		if b.SnapshotComplete {
			break
		}
	}
	if seen != 300 {
		t.Fatalf("snapshot had %d targets, want 300", seen)
	}
	if ev := collect(t, w, 1)[0]; ev.Name != "after" || ev.Kind != engine.KindCreated || ev.Revision <= rev {
		t.Errorf("first live event = %+v, want CREATED of after, after revision %d", ev, rev)
	}
}

func TestWatchEmptySnapshotCompletes(t *testing.T) {
	h := newHarness(t)
	w, err := h.eng.Watch(context.Background(), engine.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b, err := w.Next(context.Background())
	if err != nil || !b.Snapshot || !b.SnapshotComplete || len(b.Events) != 0 {
		t.Fatalf("Next = %+v, %v; want an empty, complete snapshot", b, err)
	}
}

func TestWatchFilters(t *testing.T) {
	h := newHarness(t)
	since := h.eng.Revision() + 1
	makeEvents(t, h, "web", 3, map[string]string{"tier": "web"})
	makeEvents(t, h, "db", 3, map[string]string{"tier": "db"})
	if _, err := h.eng.Delete(context.Background(), "web-1"); err != nil {
		t.Fatal(err)
	}
	h.next(engine.KindDeleted)
	tests := []struct {
		name string
		opts engine.WatchOptions
		want []string // kind/name
	}{
		{"by name", engine.WatchOptions{Names: []string{"db-2", "web-1"}}, []string{"CREATED/web-1", "CREATED/db-2", "TERMINATING/web-1", "DELETED/web-1"}},
		{"by label", engine.WatchOptions{Selector: map[string]string{"tier": "db"}}, []string{"CREATED/db-0", "CREATED/db-1", "CREATED/db-2"}},
		{"by kind", engine.WatchOptions{Kinds: []engine.EventKind{engine.KindDeleted}}, []string{"DELETED/web-1"}},
		{"label and kind", engine.WatchOptions{Selector: map[string]string{"tier": "web"}, Kinds: []engine.EventKind{engine.KindTerminating}}, []string{"TERMINATING/web-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Since = since
			w, err := h.eng.Watch(context.Background(), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			got := collect(t, w, len(tt.want))
			for i, ev := range got {
				if s := ev.Kind.String() + "/" + ev.Name; i >= len(tt.want) || s != tt.want[i] {
					t.Fatalf("event %d = %s, want %v", i, s, tt.want)
				}
			}
			// Nothing else matches: a marker that does not pass the filter
			// must not arrive, so Next only times out.
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			if b, err := w.Next(ctx); err == nil {
				t.Fatalf("unexpected extra events %+v", b.Events)
			}
		})
	}
}

func TestWatchSlowConsumerIsCutOffWithItsLastRevision(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) { o.WatchBuffer = 3 })
	w, err := h.eng.Watch(context.Background(), engine.WatchOptions{Since: h.eng.Revision() + 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	revs := makeEvents(t, h, "a", 2, nil)
	got := collect(t, w, 2) // delivered: the first two
	if got[1].Revision != revs[1] {
		t.Fatalf("got %d, want %d", got[1].Revision, revs[1])
	}
	makeEvents(t, h, "b", 5, nil) // more than the buffer, unread
	_, err = w.Next(context.Background())
	var slow *engine.SlowWatcherError
	if !errors.As(err, &slow) || !errors.Is(err, engine.ErrResourceExhausted) {
		t.Fatalf("Next of a slow watcher: %v, want SlowWatcherError", err)
	}
	if slow.LastRevision != revs[1] {
		t.Errorf("last delivered revision = %d, want %d", slow.LastRevision, revs[1])
	}
	// Lossless: resuming from LastRevision+1 replays everything missed.
	w2, err := h.eng.Watch(context.Background(), engine.WatchOptions{Since: slow.LastRevision + 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if got := collect(t, w2, 5); got[0].Name != "b-0" || got[4].Name != "b-4" {
		t.Errorf("resume gives %s..%s, want b-0..b-4", got[0].Name, got[4].Name)
	}
}

func TestThousandWatchersEachGetEveryEvent(t *testing.T) {
	h := newHarness(t)
	const watchers, events = 1000, 50
	since := h.eng.Revision() + 1
	ws := make([]*engine.Watcher, watchers)
	for i := range ws {
		w, err := h.eng.Watch(context.Background(), engine.WatchOptions{Since: since})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		ws[i] = w
	}
	var wg sync.WaitGroup
	errs := make(chan error, watchers)
	for _, w := range ws {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var last uint64
			for n := 0; n < events; {
				b, err := w.Next(ctx)
				if err != nil {
					errs <- err
					return
				}
				for _, ev := range b.Events {
					if want := fmt.Sprintf("e-%d", n); ev.Name != want || ev.Revision <= last {
						errs <- fmt.Errorf("event %d: %s at revision %d after %d, want %s in revision order", n, ev.Name, ev.Revision, last, want)
						return
					}
					last = ev.Revision
					n++
				}
			}
		})
	}
	makeEvents(t, h, "e", events, nil)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := h.eng.Stats().Watchers; got != watchers+1 { // +1: the harness's own
		t.Errorf("Stats().Watchers = %d, want %d", got, watchers+1)
	}
}

func TestMaxWatchers(t *testing.T) {
	// The harness holds one watcher of its own.
	h := newHarness(t, func(o *engine.Options) { o.MaxWatchers = 3 })
	ctx := context.Background()
	var open []*engine.Watcher
	for range 2 {
		w, err := h.eng.Watch(ctx, engine.WatchOptions{})
		if err != nil {
			t.Fatalf("Watch within the limit: %v", err)
		}
		open = append(open, w)
	}
	if got := h.eng.Stats().Watchers; got != 3 {
		t.Fatalf("Stats().Watchers = %d, want 3", got)
	}
	_, err := h.eng.Watch(ctx, engine.WatchOptions{Since: 1})
	if !errors.Is(err, engine.ErrResourceExhausted) {
		t.Fatalf("Watch beyond --max-watchers: %v, want ErrResourceExhausted", err)
	}
	open[0].Close()
	open[0].Close() // twice: counted once
	w, err := h.eng.Watch(ctx, engine.WatchOptions{})
	if err != nil {
		t.Fatalf("Watch after one was closed: %v", err)
	}
	w.Close()
	open[1].Close()
}

// TestMaxWatchersPerClient: one identity cannot take every slot of
// MaxWatchers; another still gets a watcher, and so do callers without an
// identity.
func TestMaxWatchersPerClient(t *testing.T) {
	// The harness holds one watcher of its own (no identity).
	h := newHarness(t, func(o *engine.Options) { o.MaxWatchers = 10; o.MaxWatchersPerClient = 4 })
	alice, bob := engine.WithClient(context.Background(), "alice"), engine.WithClient(context.Background(), "bob")
	var open []*engine.Watcher
	defer func() {
		for _, w := range open {
			w.Close()
		}
	}()
	watch := func(ctx context.Context) error {
		w, err := h.eng.Watch(ctx, engine.WatchOptions{})
		if err == nil {
			open = append(open, w)
		}
		return err
	}
	taken := 0
	for range 10 { // alice tries to take every slot
		if err := watch(alice); err != nil {
			if !errors.Is(err, engine.ErrResourceExhausted) || !strings.Contains(err.Error(), "--max-watchers-per-client") {
				t.Fatalf("alice's watcher beyond her limit: %v, want ErrResourceExhausted naming --max-watchers-per-client", err)
			}
			continue
		}
		taken++
	}
	if taken != 4 {
		t.Errorf("alice holds %d watchers, want 4 (MaxWatchersPerClient)", taken)
	}
	if err := watch(bob); err != nil {
		t.Errorf("bob's watcher while alice holds her most: %v", err)
	}
	if err := watch(context.Background()); err != nil {
		t.Errorf("a watcher without an identity: %v", err)
	}
	open[0].Close()
	open[0].Close() // twice: counted once
	open = open[1:]
	if err := watch(alice); err != nil {
		t.Errorf("alice's watcher after she closed one: %v", err)
	}
	if err := watch(alice); !errors.Is(err, engine.ErrResourceExhausted) {
		t.Errorf("alice's fifth watcher: %v, want ErrResourceExhausted", err)
	}
}

// TestSnapshotStatusCarriesTheTransitionsOutcome: a snapshot taken after
// a transition shows the probe outcome that caused it (message, probe
// time, counts), as the transition event did, not the status from before.
func TestSnapshotStatusCarriesTheTransitionsOutcome(t *testing.T) {
	h := newHarness(t)
	b := h.newBackend(200)
	live := b.probe(1, 0)
	live.FailureThreshold = 1
	h.create(&target.Spec{Name: "a", LivenessProbe: live})
	b.set(503)
	h.advance(time.Second, 100*time.Millisecond)
	tr := h.next(engine.KindTransition)
	if tr.To != probe.Failure || tr.Message == "" {
		t.Fatalf("transition %+v, want to Failure with a message", tr)
	}
	w, err := h.eng.Watch(context.Background(), engine.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	batch, err := w.Next(context.Background())
	if err != nil || !batch.SnapshotComplete || len(batch.Events) != 1 {
		t.Fatalf("snapshot = %+v, %v; want the one target", batch, err)
	}
	ps := batch.Events[0].Target.Status.Probes[probe.Liveness]
	if ps.Result != probe.Failure || ps.LastMessage != tr.Message || !ps.LastProbeTime.Equal(tr.Time) ||
		ps.ConsecutiveFailures != 1 || ps.ProbesTotal != 2 {
		t.Errorf("snapshot liveness status %+v, want the failure of %s: %q, 1 consecutive failure, 2 probes", ps, tr.Time, tr.Message)
	}
}
