package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/tcpproxy"
	"github.com/probed/probed/store/etcd"
	"github.com/probed/probed/store/storetest"
)

// TestEngineReloadsAfterCompaction: a replica cut off from etcd (a paused
// proxy, its connections cut) while another writes and etcd compacts
// past what it had read does not stop when it reconnects: it reloads in
// place — the target created meanwhile appears, the one deleted
// meanwhile goes, the one it knew stays —, its live watcher ends with
// ErrCompacted naming the oldest revision retained, a new watch works,
// and it follows what is written after.
func TestEngineReloadsAfterCompaction(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	direct := c.Client(t)
	proxy := tcpproxy.Start(t, c.Endpoints()[0])
	// A member of one shard that it does not own.
	_, opts := member(t, c.Client(t), "", 1, "cut")
	cut := startReplica(t, open(t, etcdtest.ClientOf(t, proxy.Addr()), opts))
	writer := open(t, direct, etcd.Options{ReplicaID: "writer"})

	kept, dropped := create("kept"), create("dropped")
	commit(t, writer, kept, dropped)
	cut.next(engine.KindCreated, 0)
	cut.next(engine.KindCreated, 0)
	ctx := t.Context()
	w, err := cut.eng.Watch(ctx, engine.WatchOptions{Since: cut.eng.Revision() + 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	first := make(chan error, 1)
	go func() {
		_, err := w.Next(ctx)
		first <- err
	}()

	proxy.Pause()
	proxy.Cut()
	gone := storetest.Delete("dropped", at(1))
	added := create("added")
	commit(t, writer, gone)
	commit(t, writer, added)
	tr := transition(kept, 1)
	commit(t, writer, tr)
	if _, err := direct.Compact(ctx, currentRevision(t, direct)); err != nil {
		t.Fatal(err)
	}
	proxy.Resume()

	poll.UntilMet(t, "the view reloaded in place", 30*time.Second, func() string {
		_, errAdded := cut.eng.Get(ctx, "added")
		_, errDropped := cut.eng.Get(ctx, "dropped")
		if errAdded == nil && errors.Is(errDropped, engine.ErrNotFound) {
			return ""
		}
		msg := fmt.Sprintf("after the compaction: Get(added) = %v, Get(dropped) = %v; want the view reloaded in place", errAdded, errDropped)
		if errors.Is(errAdded, engine.ErrClosed) {
			t.Fatal(msg)
		}
		return msg
	})
	if got, err := cut.eng.Get(ctx, "kept"); err != nil || got.Status.Revision != tr.Event.Revision {
		t.Errorf("Get(kept) after the reload = %+v, %v; want its transition written during the cut", got, err)
	}
	select {
	case err := <-first:
		var ce *engine.CompactedError
		if !errors.As(err, &ce) || ce.Oldest != tr.Event.Revision {
			t.Errorf("the live watcher ended with %v, want a CompactedError naming the oldest retained revision %d", err, tr.Event.Revision)
		}
	case <-time.After(10 * time.Second):
		t.Error("the live watcher did not end after the reload")
	}
	w2, err := cut.eng.Watch(ctx, engine.WatchOptions{Since: cut.eng.Revision() + 1})
	if err != nil {
		t.Fatalf("Watch after the reload: %v", err)
	}
	defer w2.Close()
	later := create("later")
	commit(t, writer, later)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	b, err := w2.Next(wctx)
	if err != nil || len(b.Events) == 0 || b.Events[0].Name != "later" {
		t.Errorf("after the reload, the next event = %+v, %v; want the create of later", b, err)
	}
}
