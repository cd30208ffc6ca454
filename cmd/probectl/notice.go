package main

import (
	"fmt"
	"io"
	"sync"

	"github.com/probed/probed/client"
)

// connNotice tells the user on stderr when a watch cannot reach probed,
// loses it, and reaches it again: one line per change, never one per
// retry. Its state method is a client.WithStateFunc.
type connNotice struct {
	w    io.Writer
	addr string

	mu   sync.Mutex // guards the fields below
	ever bool       // connected at least once
	down bool       // a failure was reported and no connection since
	err  error      // the last failure
}

func newConnNotice(w io.Writer, addr string) *connNotice {
	return &connNotice{w: w, addr: addr}
}

func (n *connNotice) state(s client.WatchState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s.Connected {
		if n.down {
			_, _ = fmt.Fprintf(n.w, "probectl: connected to probed at %s\n", n.addr)
		}
		n.ever, n.down, n.err = true, false, nil
		return
	}
	n.err = s.Err
	if n.down {
		return // still down: said already
	}
	n.down = true
	if n.ever {
		_, _ = fmt.Fprintf(n.w, "probectl: lost probed at %s: %v; reconnecting\n", n.addr, s.Err)
		return
	}
	_, _ = fmt.Fprintf(n.w, "probectl: cannot reach probed at %s: %v; retrying (Ctrl-C to stop)\n", n.addr, s.Err)
}

// lastFailure returns why the watch is not connected, or nil when it is
// (or has not tried yet).
func (n *connNotice) lastFailure() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down {
		return n.err
	}
	return nil
}

// lockedWriter serialises writes: probectl's stderr gets notices from a
// watch's goroutine as well as errors from the command.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
