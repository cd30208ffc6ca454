package client_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestWatchResumesOnAnotherReplica: a client of a cluster's replicas (a
// comma-separated address list) keeps its Watch when the replica serving
// it goes away: the watch resumes on another replica from the revision it
// last saw, and delivers every event once, in order — the same events a
// replay from the surviving replica gives.
func TestWatchResumesOnAnotherReplica(t *testing.T) {
	rs := probedtest.StartReplicas(t, 2, probedtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, rs.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	create := func(name string) {
		t.Helper()
		// A replica just stopped: the client moves on to another.
		poll.UntilMet(t, "Create("+name+") served by a replica that runs", 30*time.Second, func() string {
			if _, err := c.Create(ctx, &probev1.Target{Name: name}); err != nil {
				return err.Error()
			}
			return ""
		})
	}
	create("r0-a")
	create("r1-a")

	var got []uint64
	events := c.Watch(ctx, client.WithSince(1))
	next := func() {
		t.Helper()
		select {
		case r := <-events:
			if r.Err != nil {
				t.Fatalf("watch ended: %v", r.Err)
			}
			for _, ev := range r.Events {
				got = append(got, ev.GetRevision())
			}
		case <-ctx.Done():
			t.Fatalf("no watch response; got %v", got)
		}
	}
	for len(got) < 2 {
		next()
	}

	// Stop the replica serving the watch; the other serves everything.
	serving := -1
	for i, s := range rs.Servers {
		if s.Engine.Stats().Watchers > 0 {
			serving = i
		}
	}
	if serving < 0 {
		t.Fatal("no replica serves the watch")
	}
	rs.Servers[serving].Stop()
	survivor := rs.Servers[1-serving]
	for i := range 3 {
		create(fmt.Sprintf("r%d-b%d", 1-serving, i))
	}
	for len(got) < 5 {
		next()
	}

	replay := client.New(survivor.Conn).Watch(ctx, client.WithSince(1))
	var want []uint64
	for len(want) < len(got) {
		r := <-replay
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		for _, ev := range r.Events {
			want = append(want, ev.GetRevision())
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("watch across the replicas delivered revisions %v, the surviving replica's history is %v", got, want)
	}
}
