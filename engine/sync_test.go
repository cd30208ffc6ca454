package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/bolt"
)

// TestSyncOverBolt: Sync over a store that is not shared (bbolt) returns
// once the engine's view has reached the revision, as over a shared one.
// It used to wait for ever: only a shared store's follow loop ran the
// callbacks waiting for a revision.
func TestSyncOverBolt(t *testing.T) {
	store, err := bolt.Open(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h := newHarness(t, func(o *engine.Options) { o.Store = store })
	const creates = 20
	// bbolt's revisions are contiguous: each create takes one.
	want := h.eng.Revision() + creates
	// The bound only keeps a failing test from hanging; it is no timing
	// assertion.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	synced := make(chan error, 1)
	go func() { synced <- h.eng.Sync(ctx, want) }()
	for i := range creates {
		h.create(&target.Spec{Name: fmt.Sprintf("sync-%d", i)})
	}
	if err := <-synced; err != nil {
		t.Fatalf("Sync(%d) with the view at %d: %v", want, h.eng.Revision(), err)
	}
	if got := h.eng.Revision(); got < want {
		t.Fatalf("Sync returned with the view at %d, before %d", got, want)
	}
}
