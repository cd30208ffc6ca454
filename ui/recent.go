package ui

import (
	"context"
	"errors"
	"time"

	"github.com/probed/probed/engine"
)

// This file gives a new page the recent past: the latest events for its
// feed of transitions, and each target's readiness over the last
// TimelineWindow for its timeline, both from the engine's retained history
// (so a page opened now shows what happened before it was opened).

// recentEvents is how many events the "recent" message carries for the
// feed.
const recentEvents = 150

// maxChanges is how many readiness changes a timeline keeps (the latest):
// a target flapping every 100 ms must not make the message huge.
const maxChanges = 200

// Timeline states: what a timeline segment shows.
const (
	stateNotReady    = 0
	stateReady       = 1
	stateTerminating = 2
)

// recentData is the "recent" message: sent once after the snapshot of a
// new stream, consistent with it (every event up to its revision).
type recentData struct {
	// Events are the latest events the feed shows (no "initialized"
	// ones), oldest first.
	Events []eventView `json:"events"`
	// Timelines hold the readiness changes of the targets whose readiness
	// changed (or that were created) in the window; a target without one
	// kept its current state through the window.
	Timelines map[string]*timelineView `json:"timelines"`
	// From and To are the window, Unix ms (To: now on the server's clock).
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// timelineView is one target's readiness in the window.
type timelineView struct {
	// Start is the state at From (0 not ready, 1 ready, 2 terminating);
	// absent when unknown: the target was created later (Created), or the
	// history does not reach back to From.
	Start *int `json:"start,omitempty"`
	// Created is when the target was created, when in the window.
	Created int64 `json:"created,omitempty"`
	// Changes are [time (Unix ms), state] in time order, the latest
	// maxChanges of them.
	Changes [][2]int64 `json:"changes"`
}

// timelineState follows one target through the history.
type timelineState struct {
	known       bool // state is known (an event about the target was seen)
	state       int
	terminating bool
	view        *timelineView // once the target changed in the window
}

// recent computes the "recent" message at revision end.
func (s *Server) recent(ctx context.Context, end uint64) (*recentData, error) {
	now := s.opts.Clock.Now()
	from := now.Add(-s.opts.TimelineWindow)
	d := &recentData{Timelines: map[string]*timelineView{}, From: from.UnixMilli(), To: now.UnixMilli()}
	// Events are kept as they are and viewed once the latest are known:
	// the history holds up to engine.DefaultHistory of them.
	feed := newLastN[engine.Event](recentEvents)
	targets := map[string]*timelineState{}
	err := s.scanHistory(ctx, nil, end, func(ev *engine.Event) {
		if ev.Kind != engine.KindInitialized {
			feed.add(*ev)
		}
		followReadiness(targets, ev, from)
	})
	if err != nil {
		return nil, err
	}
	d.Events = viewEvents(feed.values())
	for name, tl := range targets {
		if tl.view != nil {
			d.Timelines[name] = tl.view
		}
	}
	return d, nil
}

// followReadiness records what ev changed in its target's readiness.
func followReadiness(targets map[string]*timelineState, ev *engine.Event, from time.Time) {
	if ev.Kind == engine.KindDeleted {
		delete(targets, ev.Name)
		return
	}
	tl := targets[ev.Name]
	if tl == nil || ev.Kind == engine.KindCreated {
		tl = &timelineState{} // a new target by that name
		targets[ev.Name] = tl
	}
	if ev.Kind == engine.KindTerminating {
		tl.terminating = true
	}
	state := stateNotReady
	switch {
	case tl.terminating:
		state = stateTerminating
	case ev.Ready:
		state = stateReady
	}
	changed := !tl.known || state != tl.state
	inWindow := !ev.Time.Before(from)
	if inWindow && (changed || ev.Kind == engine.KindCreated) {
		if tl.view == nil {
			tl.view = &timelineView{}
			if tl.known && ev.Kind != engine.KindCreated {
				start := tl.state
				tl.view.Start = &start
			}
		}
		if ev.Kind == engine.KindCreated {
			tl.view.Created = ev.Time.UnixMilli()
		}
		if len(tl.view.Changes) == maxChanges {
			// Keep the latest: what came before the oldest kept change is
			// no longer known.
			tl.view.Changes = append(tl.view.Changes[:0], tl.view.Changes[1:]...)
			tl.view.Start, tl.view.Created = nil, 0
		}
		tl.view.Changes = append(tl.view.Changes, [2]int64{ev.Time.UnixMilli(), int64(state)})
	}
	tl.known, tl.state = true, state
}

// scanHistory calls fn with every retained event about names (all targets
// when empty) up to revision end, oldest first. Events older than the
// retained history are not seen.
func (s *Server) scanHistory(ctx context.Context, names []string, end uint64, fn func(*engine.Event)) error {
	opts := engine.WatchOptions{Since: 1, Names: names, Visible: s.visible(ctx)}
	var w *engine.Watcher
	var err error
	for range 3 { // the history may move on between attempts
		w, err = s.eng.Watch(ctx, opts)
		ce, compacted := errors.AsType[*engine.CompactedError](err)
		if !compacted {
			break
		}
		opts.Since = ce.Oldest
	}
	if err != nil {
		return err
	}
	defer w.Close()

	// Next reads the retained history without waiting; only live events
	// are waited for, and a done context makes it return instead.
	done, cancel := context.WithCancel(ctx)
	cancel()
	for {
		b, err := w.Next(done)
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() == nil {
				return nil // read everything retained
			}
			return err
		}
		for i := range b.Events {
			if b.Events[i].Revision > end {
				return nil
			}
			fn(&b.Events[i])
		}
		if b.Revision >= end {
			return nil
		}
	}
}

// lastN keeps the last n values added.
type lastN[T any] struct {
	n     int
	buf   []T
	first int // index of the oldest once full
}

func newLastN[T any](n int) *lastN[T] { return &lastN[T]{n: n, buf: make([]T, 0, min(n, 1024))} }

func (l *lastN[T]) add(v T) {
	if len(l.buf) < l.n {
		l.buf = append(l.buf, v)
		return
	}
	l.buf[l.first] = v
	l.first = (l.first + 1) % l.n
}

// values returns the values kept, oldest first.
func (l *lastN[T]) values() []T {
	return append(l.buf[l.first:], l.buf[:l.first]...)
}
