package engine_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/engine"
)

// nextErr waits for w's next batch and returns its error (nil if events
// came).
func nextErr(t *testing.T, w *engine.Watcher) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := w.Next(ctx)
	return err
}

// catchUp has w read the history it starts from (nothing) and so receive
// pushes from then on, as a stream that has sent everything does.
func catchUp(t *testing.T, w *engine.Watcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next of a new watcher: %v, want it to wait", err)
	}
}

// wantSlow fails t unless err ends a watcher as too slow for the bound
// named by flag, and returns the revision to resume from.
func wantSlow(t *testing.T, err error, flag string) uint64 {
	t.Helper()
	var slow *engine.SlowWatcherError
	if !errors.As(err, &slow) || !errors.Is(err, engine.ErrResourceExhausted) || !strings.Contains(err.Error(), flag) {
		t.Fatalf("Next of a slow watcher: %v, want a SlowWatcherError naming %s", err, flag)
	}
	return slow.LastRevision + 1
}

func TestWatchSlowConsumerCutByBytes(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) { o.WatchBufferBytes = 8 << 10 })
	since := h.eng.Revision() + 1
	w, err := h.eng.Watch(context.Background(), engine.WatchOptions{Since: since})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	catchUp(t, w)
	// Far fewer events than --watch-buffer, but more bytes than allowed:
	// each CREATED event carries its target.
	makeEvents(t, h, "a", 30, nil)
	resume := wantSlow(t, nextErr(t, w), "bytes of events pending (--watch-buffer-bytes)")
	if resume != since {
		t.Errorf("resume from %d, want %d (nothing was delivered)", resume, since)
	}
	// Lossless: the history has every event it missed.
	w2, err := h.eng.Watch(context.Background(), engine.WatchOptions{Since: resume})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if got := collect(t, w2, 30); got[0].Name != "a-0" || got[29].Name != "a-29" {
		t.Errorf("resume gives %s..%s, want a-0..a-29", got[0].Name, got[29].Name)
	}
}

// TestWatchTotalBytesCutsTheSlowestFirst: watchers that each stay within
// their own bound can together pass the total; the one with the most
// pending is ended first, and the others keep going.
func TestWatchTotalBytesCutsTheSlowestFirst(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) { o.WatchTotalBytes = 16 << 10 })
	slowest, err := h.eng.Watch(context.Background(), engine.WatchOptions{Since: h.eng.Revision() + 1})
	if err != nil {
		t.Fatal(err)
	}
	defer slowest.Close()
	catchUp(t, slowest)
	makeEvents(t, h, "a", 12, nil)
	later, err := h.eng.Watch(context.Background(), engine.WatchOptions{Since: h.eng.Revision() + 1})
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	catchUp(t, later)
	makeEvents(t, h, "b", 10, nil)

	wantSlow(t, nextErr(t, slowest), "bytes of events were pending in all watchers (--watch-total-bytes)")
	if got := collect(t, later, 10); got[0].Name != "b-0" || got[9].Name != "b-9" {
		t.Errorf("the other watcher got %s..%s, want b-0..b-9", got[0].Name, got[9].Name)
	}
}

// TestWatchersThatNeverReadAreBoundedInMemory: 200 watchers that never
// read, and a stream of small changes. Bounded by count alone (10,000
// events each), their queues grew to gigabytes (issue 14: RSS 29 MB →
// 630 MB); bounded in bytes in total, the memory they hold stays near the
// bound. Not parallel: it measures the heap.
func TestWatchersThatNeverReadAreBoundedInMemory(t *testing.T) {
	const (
		watchers = 200
		events   = 2000
		total    = 4 << 20
	)
	h := newHarness(t, func(o *engine.Options) { o.WatchTotalBytes = total })
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	since := h.eng.Revision() + 1
	for range watchers {
		w, err := h.eng.Watch(context.Background(), engine.WatchOptions{Since: since})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		catchUp(t, w) // then never read again
	}
	makeEvents(t, h, "n", events, nil)

	if got := h.eng.PendingWatchBytes(); got > total+4<<10 {
		t.Errorf("%d bytes pending in watchers, want at most the bound %d (+ one event)", got, total)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	// Unbounded, 200 × 2,000 queued events hold 60+ MB.
	const limit = 24 << 20
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > limit {
		t.Errorf("the heap grew by %d bytes with %d watchers that never read %d events; want at most %d", grew, watchers, events, limit)
	}
}

// TestWatchSelectionCountsTowardsWatchBytes: what a watcher's names and
// label selector hold counts in the watchers' bytes while it is open,
// and past --watch-total-bytes the watchers holding the most are ended.
func TestWatchSelectionCountsTowardsWatchBytes(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) { o.WatchTotalBytes = 350 << 10 })
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("target-%04d-%s", i, strings.Repeat("x", 40))
	}
	selector := map[string]string{"app": "web"}
	var watchers []*engine.Watcher
	for i := range 3 {
		w, err := h.eng.Watch(context.Background(), engine.WatchOptions{Since: h.eng.Revision() + 1, Names: names, Selector: selector})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		catchUp(t, w)
		watchers = append(watchers, w)
		// 1,000 names of 51 bytes: more than 51 KB each.
		if got := h.eng.PendingWatchBytes(); got < int64(i+1)*51_000 {
			t.Fatalf("%d watchers of 1,000 names count %d bytes, want at least %d", i+1, got, (i+1)*51_000)
		}
	}
	// A fourth passes 350 KiB: one of the first three is ended.
	w, err := h.eng.Watch(context.Background(), engine.WatchOptions{Since: h.eng.Revision() + 1, Names: names, Selector: selector})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.eng.PendingWatchBytes(); got > 350<<10 {
		t.Errorf("%d bytes counted with 4 watchers, want at most --watch-total-bytes (%d)", got, 350<<10)
	}
	ended := 0
	for _, w := range watchers {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		if _, err := w.Next(ctx); errors.Is(err, engine.ErrResourceExhausted) {
			wantSlow(t, err, "--watch-total-bytes")
			ended++
		}
		cancel()
	}
	if ended != 1 {
		t.Errorf("%d watchers ended, want 1", ended)
	}
	w.Close()
	for _, w := range watchers {
		w.Close()
	}
	if got := h.eng.PendingWatchBytes(); got != 0 {
		t.Errorf("%d bytes counted with every watcher closed, want 0", got)
	}
}
