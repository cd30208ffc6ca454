package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/refused"
)

// states collects the states WithStateFunc reports.
type states chan client.WatchState

func (s states) record(st client.WatchState) {
	select {
	case s <- st:
	default: // the test reads them; never block the watch
	}
}

// next returns the next reported state.
func (s states) next(t *testing.T) client.WatchState {
	t.Helper()
	select {
	case st := <-s:
		return st
	case <-time.After(10 * time.Second):
		t.Fatal("no watch state within 10s")
		return client.WatchState{}
	}
}

// TestWatchReportsConnectionState: a watch of a server that is down says
// so (ErrUnavailable and when it retries), says when it connects, also on
// an idle resumed stream that has no event to send, and says when it loses
// the server.
func TestWatchReportsConnectionState(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr := refused.Reserve(t).Addr() // nothing listens yet
	c := dial(t, addr)
	st := make(states, 100)
	ch := c.Watch(ctx, client.WithBackoff(20*time.Millisecond, 100*time.Millisecond), client.WithStateFunc(st.record))

	down := st.next(t)
	if down.Connected || !errors.Is(down.Err, client.ErrUnavailable) || down.Retry <= 0 {
		t.Fatalf("state with no server = %+v, want not connected, ErrUnavailable, a retry delay", down)
	}

	s1 := probedtest.Start(t, probedtest.Options{Addr: addr})
	for {
		if got := st.next(t); got.Connected {
			if got.Err != nil || got.Retry != 0 {
				t.Errorf("connected state = %+v, want no error and no retry", got)
			}
			break
		}
	}
	recvSnapshot(t, ch)

	s1.Stop()
	if lost := st.next(t); lost.Connected || lost.Err == nil {
		t.Fatalf("state after the server stopped = %+v, want not connected with an error", lost)
	}
	// The restarted server has nothing to send to the resumed watch (its
	// progress notifications come every 10s): the headers alone say that
	// the watch is connected.
	probedtest.Start(t, probedtest.Options{Addr: addr, Store: s1.Store})
	for {
		if got := st.next(t); got.Connected {
			break
		}
	}
	select {
	case r := <-ch:
		t.Errorf("resumed watch delivered %+v, want nothing yet", r)
	default:
	}
}
