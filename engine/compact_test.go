package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/poll"
)

// compactionMin is how many events must have left the in-memory history
// before the compaction loop trims the store (engine/entry.go).
const compactionMin = 1024

// createMany creates n targets without probes (one CREATED event each)
// and returns the revisions of their events.
func createMany(t *testing.T, eng *engine.Engine, prefix string, n int) []uint64 {
	t.Helper()
	revs := make([]uint64, 0, n)
	for i := range n {
		tg, err := eng.Create(context.Background(), &target.Spec{Name: fmt.Sprintf("%s-%04d", prefix, i)})
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, tg.Status.Revision)
	}
	return revs
}

// storedRevisions returns the revisions of the events in the store.
func storedRevisions(t *testing.T, s engine.Store) (*engine.Stored, []uint64) {
	t.Helper()
	st, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	revs := make([]uint64, len(st.Events))
	for i, ev := range st.Events {
		revs[i] = ev.Revision
	}
	return st, revs
}

// waitStored polls the store until its events are want (compaction runs
// in the background after the tick) and fails after 10s.
func waitStored(t *testing.T, s engine.Store, want []uint64) *engine.Stored {
	t.Helper()
	var st *engine.Stored
	poll.UntilMet(t, "the stored events", 10*time.Second, func() string {
		var got []uint64
		if st, got = storedRevisions(t, s); slices.Equal(got, want) {
			return ""
		}
		return fmt.Sprintf("stored events %d..%d (%d), want %d..%d (%d)", first(got), last(got), len(got), first(want), last(want), len(want))
	})
	return st
}

func first(revs []uint64) uint64 {
	if len(revs) == 0 {
		return 0
	}
	return revs[0]
}

func last(revs []uint64) uint64 {
	if len(revs) == 0 {
		return 0
	}
	return revs[len(revs)-1]
}

// wantCompacted asserts that a watch from since is a CompactedError whose
// oldest retained revision is oldest.
func wantCompacted(t *testing.T, eng *engine.Engine, since, oldest uint64) {
	t.Helper()
	w, err := eng.Watch(context.Background(), engine.WatchOptions{Since: since})
	if err == nil {
		w.Close()
	}
	var compacted *engine.CompactedError
	if !errors.As(err, &compacted) || !errors.Is(err, engine.ErrCompacted) || compacted.Oldest != oldest {
		t.Errorf("Watch(Since %d) = %v, want a CompactedError with oldest retained revision %d", since, err, oldest)
	}
}

// wantReplay asserts that a watch from since replays exactly want, then
// delivers a live event made after it, once.
func wantReplay(t *testing.T, h *harness, since uint64, want []uint64, live string) {
	t.Helper()
	w, err := h.eng.Watch(context.Background(), engine.WatchOptions{Since: since})
	if err != nil {
		t.Fatalf("Watch(Since %d) = %v", since, err)
	}
	defer w.Close()
	if got := revisions(collect(t, w, len(want))); !slices.Equal(got, want) {
		t.Fatalf("Watch(Since %d) replayed %v, want %v", since, got, want)
	}
	tg := h.create(&target.Spec{Name: live})
	if got := collect(t, w, 1); len(got) != 1 || got[0].Revision != tg.Status.Revision || got[0].Name != live {
		t.Fatalf("after the replay got %v, want only the live event %d", revisions(got), tg.Status.Revision)
	}
}

func revisions(evs []engine.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Revision
	}
	return out
}

// TestBackgroundCompaction: with History 10, once enough events have left
// memory, the compaction tick trims the store to exactly the in-memory
// window; a restart then resumes a watch from the oldest retained
// revision and refuses older ones with a CompactedError.
func TestBackgroundCompaction(t *testing.T) {
	const history = 10
	h := newHarness(t, func(o *engine.Options) { o.History = history })
	const n = history + compactionMin + 66
	revs := createMany(t, h.eng, "t", n)
	window := revs[n-history:]
	oldest, newestGone := window[0], revs[n-history-1]
	wantCompacted(t, h.eng, revs[0], oldest)

	// Not before the interval: the store still holds everything.
	h.advance(9*time.Second, time.Second)
	if _, got := storedRevisions(t, h.store); !slices.Equal(got, revs) {
		t.Fatalf("store before the compaction interval holds %d events, want all %d", len(got), n)
	}
	h.advance(time.Second, time.Second)
	st := waitStored(t, h.store, window)
	if st.Compacted != newestGone {
		t.Errorf("Stored.Compacted = %d, want %d (the newest event gone)", st.Compacted, newestGone)
	}

	h.restart()
	if got := h.eng.Revision(); got != revs[n-1] {
		t.Fatalf("revision after the restart = %d, want %d", got, revs[n-1])
	}
	for _, since := range []uint64{1, revs[0], newestGone} {
		wantCompacted(t, h.eng, since, oldest)
	}
	// Revisions are not contiguous (the harness's store steps by 3): a
	// revision between the newest compacted one and the oldest retained
	// one lost nothing.
	wantReplay(t, h, newestGone+1, window, "live")
}

// TestCompactionAfterRestartWithMoreEventsThanHistory: a process that
// stopped before its compaction tick leaves more events in the store than
// the next one retains; those are trimmed as soon as the next one starts,
// before any tick, so that a crash loop faster than the interval does not
// grow the store forever.
func TestCompactionAfterRestartWithMoreEventsThanHistory(t *testing.T) {
	const history = 10
	h := newHarness(t, func(o *engine.Options) { o.History = compactionMin * 2 })
	const n = history + compactionMin + 66
	revs := createMany(t, h.eng, "t", n)
	h.opts.History = history
	h.restart()
	wantCompacted(t, h.eng, revs[0], revs[n-history])
	waitStored(t, h.store, revs[n-history:])
}
