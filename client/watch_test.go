package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/probed/probed/client"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/server"
)

// fastProgress makes idle watch streams report their revision quickly.
var fastProgress = server.Options{ProgressInterval: 50 * time.Millisecond}

func TestWatchSnapshotThenLive(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, c := start(t, probedtest.Options{})
	for _, n := range []string{"b", "a"} {
		if _, err := c.Create(ctx, plain(n, nil)); err != nil {
			t.Fatal(err)
		}
	}

	ch := c.Watch(ctx)
	first, snap := recvSnapshot(t, ch)
	if first.Resynced {
		t.Error("first snapshot response is Resynced, want not")
	}
	if diff := cmp.Diff([]string{"a", "b"}, names(snap)); diff != "" {
		t.Errorf("snapshot names (-want +got):\n%s", diff)
	}
	for _, ev := range snap {
		if ev.GetKind() != probev1.EventKind_EVENT_KIND_SNAPSHOT || ev.GetTarget().GetName() != ev.GetName() || !ev.GetReady() {
			t.Errorf("snapshot event = %v, want a ready SNAPSHOT carrying its target", ev)
		}
	}

	created, err := c.Create(ctx, plain("c", nil))
	if err != nil {
		t.Fatal(err)
	}
	evs := recvEvents(t, ch, 1)
	if ev := evs[0]; ev.GetName() != "c" || ev.GetKind() != probev1.EventKind_EVENT_KIND_CREATED || ev.GetRevision() != created.GetStatus().GetRevision() {
		t.Errorf("live event = %v, want CREATED c at revision %d", ev, created.GetStatus().GetRevision())
	}
}

func TestWatchFilters(t *testing.T) {
	t.Parallel()
	type change struct{ name, kind string }
	tests := []struct {
		name     string
		opts     []client.WatchOption
		snapshot []string
		live     []change
	}{
		{"all", nil, []string{"a", "b"},
			[]change{{"c", "CREATED"}, {"a", "UPDATED"}, {"b", "RESET"}}},
		{"names", []client.WatchOption{client.WithNames("a")}, []string{"a"},
			[]change{{"a", "UPDATED"}}},
		{"labels", []client.WatchOption{client.WithLabels(map[string]string{"team": "x"})}, []string{"a"},
			[]change{{"c", "CREATED"}, {"a", "UPDATED"}}},
		{"kinds", []client.WatchOption{client.WithKinds(probev1.EventKind_EVENT_KIND_RESET)}, []string{"a", "b"},
			[]change{{"b", "RESET"}}},
		{"names and kinds", []client.WatchOption{
			client.WithNames("a", "b"),
			client.WithKinds(probev1.EventKind_EVENT_KIND_UPDATED, probev1.EventKind_EVENT_KIND_RESET),
		}, []string{"a", "b"}, []change{{"a", "UPDATED"}, {"b", "RESET"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			_, c := start(t, probedtest.Options{Server: fastProgress})
			for _, tg := range []*probev1.Target{plain("a", map[string]string{"team": "x"}), plain("b", map[string]string{"team": "y"})} {
				if _, err := c.Create(ctx, tg); err != nil {
					t.Fatal(err)
				}
			}
			ch := c.Watch(ctx, tt.opts...)
			_, snap := recvSnapshot(t, ch)
			if diff := cmp.Diff(tt.snapshot, names(snap)); diff != "" {
				t.Errorf("snapshot (-want +got):\n%s", diff)
			}

			if _, err := c.Create(ctx, plain("c", map[string]string{"team": "x"})); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Update(ctx, plain("a", map[string]string{"team": "x", "v": "2"})); err != nil {
				t.Fatal(err)
			}
			last, err := c.Reset(ctx, "b")
			if err != nil {
				t.Fatal(err)
			}

			var got []change
			for {
				r := recv(t, ch)
				if r.Err != nil {
					t.Fatalf("watch ended: %v", r.Err)
				}
				for _, ev := range r.Events {
					got = append(got, change{ev.GetName(), ev.GetKind().String()[len("EVENT_KIND_"):]})
				}
				if r.Revision >= last.GetStatus().GetRevision() {
					break
				}
			}
			if diff := cmp.Diff(tt.live, got, cmp.AllowUnexported(change{})); diff != "" {
				t.Errorf("live events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWatchInvalidIsTerminal(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, c := start(t, probedtest.Options{})
	ch := c.Watch(ctx, client.WithNames("Not_A_Name"))
	r := recv(t, ch)
	var inv *client.InvalidError
	if !errors.As(r.Err, &inv) || len(inv.Violations) != 1 || inv.Violations[0].Field != "names[0]" {
		t.Fatalf("first response error = %v, want an *InvalidError about names[0]", r.Err)
	}
	select {
	case r, ok := <-ch:
		if ok {
			t.Fatalf("response after the terminal error: %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed after the terminal error")
	}
}

func TestWatchClosesWhenCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	_, c := start(t, probedtest.Options{})
	ch := c.Watch(ctx)
	recvSnapshot(t, ch)
	// Events the caller never reads: the watch is blocked handing one over.
	for i := range 3 {
		if _, err := c.Create(t.Context(), plain(fmt.Sprintf("t-%d", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	poll.UntilBlocked(t, "client.(*watchStream).send", 1)
	cancel()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("channel not closed within 5s of canceling")
		}
	}
}

// canonical returns the events with revisions in [from, to] as a fresh
// watch replaying history sees them.
func canonical(t *testing.T, c *client.Client, from, to uint64) []uint64 {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := c.Watch(ctx, client.WithSince(from))
	var revs []uint64
	for {
		r := recv(t, ch)
		if r.Err != nil || r.Resynced {
			t.Fatalf("canonical watch: err %v, resynced %v", r.Err, r.Resynced)
		}
		for _, ev := range r.Events {
			if ev.GetRevision() <= to {
				revs = append(revs, ev.GetRevision())
			}
		}
		if r.Revision >= to {
			return revs
		}
	}
}

// collect reads events until one is about target last, and fails on an
// error or a resync.
func collect(t *testing.T, ch <-chan client.WatchResponse, last string) []*probev1.Event {
	t.Helper()
	var evs []*probev1.Event
	for {
		r := recv(t, ch)
		if r.Err != nil {
			t.Fatalf("watch ended: %v", r.Err)
		}
		if r.Resynced || r.Snapshot {
			t.Fatalf("unexpected snapshot (resynced %v) after %d events", r.Resynced, len(evs))
		}
		for _, ev := range r.Events {
			evs = append(evs, ev)
			if ev.GetName() == last && ev.GetKind() == probev1.EventKind_EVENT_KIND_CREATED {
				return evs
			}
		}
	}
}

func revisions(evs []*probev1.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, ev := range evs {
		out[i] = ev.GetRevision()
	}
	return out
}

func TestWatchResumesAcrossRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s1 := probedtest.Start(t, probedtest.Options{})
	c := dial(t, s1.Addr)
	if _, err := c.Create(ctx, plain("before", nil)); err != nil {
		t.Fatal(err)
	}
	ch := c.Watch(ctx, client.WithBackoff(20*time.Millisecond, 200*time.Millisecond))
	_, snap := recvSnapshot(t, ch)
	if diff := cmp.Diff([]string{"before"}, names(snap)); diff != "" {
		t.Fatalf("snapshot (-want +got):\n%s", diff)
	}
	snapRev := snap[0].GetRevision()

	admin1 := client.New(s1.Conn)
	for i := range 5 {
		if _, err := admin1.Create(ctx, plain(fmt.Sprintf("one-%d", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	got := collect(t, ch, "one-4")

	// Restart probed over the same store, on the same address, and change
	// things before the watch has had a chance to reconnect.
	s1.Stop()
	s2 := probedtest.Start(t, probedtest.Options{Store: s1.Store, Addr: s1.Addr})
	admin2 := client.New(s2.Conn)
	for i := range 10 {
		if _, err := admin2.Create(ctx, plain(fmt.Sprintf("two-%d", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	got = append(got, collect(t, ch, "two-9")...)

	want := canonical(t, admin2, snapRev+1, got[len(got)-1].GetRevision())
	if diff := cmp.Diff(want, revisions(got)); diff != "" {
		t.Errorf("delivered revisions (-want +got):\n%s", diff)
	}
	seen := map[string]int{}
	for _, ev := range got {
		if ev.GetKind() == probev1.EventKind_EVENT_KIND_CREATED {
			seen[ev.GetName()]++
		}
	}
	if len(seen) != 15 {
		t.Errorf("CREATED events for %d targets, want 15: %v", len(seen), seen)
	}
	for n, k := range seen {
		if k != 1 {
			t.Errorf("CREATED %s delivered %d times, want once", n, k)
		}
	}
}

func TestWatchResyncsWhenCompacted(t *testing.T) {
	t.Parallel()
	t.Run("since compacted", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		_, c := start(t, probedtest.Options{Engine: engine.Options{History: 5}})
		var want []string
		for i := range 10 {
			want = append(want, fmt.Sprintf("t-%d", i))
			if _, err := c.Create(ctx, plain(want[i], nil)); err != nil {
				t.Fatal(err)
			}
		}
		ch := c.Watch(ctx, client.WithSince(1))
		first, snap := recvSnapshot(t, ch)
		if !first.Resynced {
			t.Error("first response is not Resynced")
		}
		if diff := cmp.Diff(want, names(snap)); diff != "" {
			t.Errorf("snapshot (-want +got):\n%s", diff)
		}
	})

	t.Run("history moved on while disconnected", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s := probedtest.Start(t, probedtest.Options{Engine: engine.Options{History: 5}})
		p := newProxy(t, s.Addr)
		c := dial(t, p.addr())
		admin := client.New(s.Conn)
		if _, err := admin.Create(ctx, plain("a", nil)); err != nil {
			t.Fatal(err)
		}
		ch := c.Watch(ctx, client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
		if first, _ := recvSnapshot(t, ch); first.Resynced {
			t.Error("initial snapshot is Resynced")
		}

		p.setDown(true)
		want := []string{"a"}
		for i := range 10 {
			want = append(want, fmt.Sprintf("b-%d", i))
			if _, err := admin.Create(ctx, plain(want[i+1], nil)); err != nil {
				t.Fatal(err)
			}
		}
		p.setDown(false)

		first, snap := recvSnapshot(t, ch)
		if !first.Resynced {
			t.Error("snapshot after reconnecting is not Resynced")
		}
		if diff := cmp.Diff(want, names(snap)); diff != "" {
			t.Errorf("new snapshot (-want +got):\n%s", diff)
		}
		if _, err := admin.Create(ctx, plain("c", nil)); err != nil {
			t.Fatal(err)
		}
		if evs := collect(t, ch, "c"); len(evs) != 1 {
			t.Errorf("live events after the resync = %v, want CREATED c only", evs)
		}
	})
}

func TestWatchSlowConsumerResumes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := probedtest.Start(t, probedtest.Options{Engine: engine.Options{WatchBuffer: 2}})
	var streams watchCounter
	c := dial(t, s.Addr, streams.option())
	ch := c.Watch(ctx, client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	_, snap := recvSnapshot(t, ch)
	if len(snap) != 0 {
		t.Fatalf("snapshot of an empty server has %d events", len(snap))
	}
	snapRev := uint64(0)

	// Nobody reads while 500 targets are created concurrently: the server
	// cuts the watch off as too slow.
	const n = 500
	admin := client.New(s.Conn)
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := admin.Create(ctx, plain(fmt.Sprintf("t-%03d", i), nil))
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	var got []*probev1.Event
	created := map[string]int{}
	for len(created) < n {
		r := recv(t, ch)
		if r.Err != nil || r.Snapshot {
			t.Fatalf("watch: err %v, snapshot %v after %d events", r.Err, r.Snapshot, len(got))
		}
		for _, ev := range r.Events {
			got = append(got, ev)
			created[ev.GetName()]++
		}
	}
	if k := streams.n.Load(); k < 2 {
		t.Errorf("the watch used %d stream(s); want the slow watcher cut off and resumed", k)
	}
	want := canonical(t, admin, snapRev+1, got[len(got)-1].GetRevision())
	if diff := cmp.Diff(want, revisions(got)); diff != "" {
		t.Errorf("delivered revisions (-want +got):\n%s", diff)
	}
	for name, k := range created {
		if k != 1 {
			t.Errorf("%s: %d events, want 1", name, k)
		}
	}
}

func TestWatchEndsWhenClientCloses(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := probedtest.Start(t, probedtest.Options{})
	c, err := client.Dial(ctx, s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	ch := c.Watch(ctx)
	recvSnapshot(t, ch)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	r := recv(t, ch)
	if !errors.Is(r.Err, context.Canceled) {
		t.Errorf("watch error after Close = %v, want a cancellation", r.Err)
	}
	if _, ok := <-ch; ok {
		t.Error("channel open after the terminal error")
	}
}
