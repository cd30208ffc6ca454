package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/timeout"
)

// The stream's messages ("event:" names). Only messages that leave the
// page consistent at a revision carry an "id:", so Last-Event-ID is always
// a revision the page has every event up to.
//
//	about     {"version", "addr", "replica"}: which probed serves the
//	          page (Options.About; replica in cluster mode only). Sent
//	          first on every stream; no id.
//	reset     {"reason"}: forget every target; a snapshot follows. Sent
//	          first on a new stream, and when the revision to resume from
//	          is no longer retained.
//	snapshot  {"targets":[target...], "complete", "revision"}: part of the
//	          state at "revision"; the last part (complete) has the id.
//	recent    {"events", "timelines", "from", "to"}: after a snapshot, the
//	          latest events and each target's readiness timeline from the
//	          retained history up to the snapshot (recent.go); no id.
//	events    {"events":[event...], "revision"}: changes, in order; id:
//	          revision (every event up to it was sent).
//	stats     {"targets":[{"name","probes"}...]}: live figures of the
//	          targets whose probes ran; no id.
//	progress  {"revision"}: the stream was idle; id: revision.
//	members   {"self", "shards", "members":[{"id","addr","shards","joined","self"}...]}:
//	          in cluster mode only, the live replicas; sent once the page
//	          is synced and whenever they change (a replica joins or
//	          leaves, shards move); no id. Targets and stats then carry
//	          "replica", the replica that probes them.

// retryMillis is the reconnection delay the stream asks the browser for.
const retryMillis = 1000

// message is one server-sent event.
type message struct {
	event string
	id    string // a revision, or "" for none
	data  []byte
	// synced: after it, the page has a complete state (the snapshot's
	// last part, or any message of a resumed stream).
	synced bool
}

// resumeRevision returns the revision the browser has every event up to:
// its Last-Event-ID header, or else the "after" query parameter (for a
// page that reconnects by itself, since a new EventSource cannot set the
// header); ok is false when there is none (start with a snapshot).
func resumeRevision(r *http.Request) (rev uint64, ok bool, err error) {
	v := r.Header.Get("Last-Event-ID")
	from := "Last-Event-ID"
	if v == "" {
		v, from = r.URL.Query().Get("after"), "after"
	}
	if v == "" {
		return 0, false, nil
	}
	rev, err = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%s %q: must be a revision", from, v)
	}
	return rev, true, nil
}

// serveEvents streams the engine's events to a page.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	after, resumed, err := resumeRevision(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	wat, resumed, reason, err := s.watch(ctx, after, resumed)
	if err != nil {
		s.fail(w, err)
		return
	}
	defer wat.Close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return // a page asking why its stream failed: the status is the answer
	}
	st := &eventStream{w: w, rc: http.NewResponseController(w), timeout: s.opts.WriteTimeout}
	// The connection may serve other requests after the stream.
	defer func() { _ = st.rc.SetWriteDeadline(time.Time{}) }()
	if err := st.retry(retryMillis); err != nil {
		return
	}
	if err := st.send(message{event: "about", data: s.about()}); err != nil {
		return
	}
	if !resumed {
		if err := st.send(message{event: "reset", data: mustJSON(map[string]string{"reason": reason})}); err != nil {
			return
		}
	}

	msgs := make(chan message)
	pumpErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { pumpErr <- s.pump(ctx, wat, msgs, resumed) })
	defer wg.Wait()
	defer cancel()

	var sub *statsSub
	var statsWake <-chan struct{}
	join := func() {
		sub = s.stats.join(s.visible(ctx))
		statsWake = sub.wake
	}
	defer func() {
		if sub != nil {
			s.stats.leave(sub)
		}
	}()
	if resumed {
		join()
	}
	for {
		select {
		case m := <-msgs:
			if err := st.send(m); err != nil {
				s.log.Debug("status page: stream write failed", "err", err)
				return
			}
			if m.synced && sub == nil {
				join()
			}
		case <-statsWake:
			if data := s.stats.nextMembers(sub); data != nil {
				if err := st.send(message{event: "members", data: data}); err != nil {
					s.log.Debug("status page: stream write failed", "err", err)
					return
				}
			}
			if data := s.stats.next(sub); data != nil {
				if err := st.send(message{event: "stats", data: data}); err != nil {
					s.log.Debug("status page: stream write failed", "err", err)
					return
				}
			}
		case err := <-pumpErr:
			// Too slow (the browser resumes from its last id), shutting
			// down or gone: end the stream.
			if errors.Is(err, engine.ErrResourceExhausted) {
				s.log.Info("status page: stream ended as too slow; the page resumes", "err", err)
			} else {
				s.log.Debug("status page: stream ended", "err", err)
			}
			return
		}
	}
}

// aboutView is the "about" message.
type aboutView struct {
	Version string `json:"version"`
	Addr    string `json:"addr"`
	Replica string `json:"replica,omitempty"`
}

// about encodes the "about" message.
func (s *Server) about() []byte {
	v := aboutView{Version: s.opts.About.Version, Addr: s.opts.About.Addr}
	if s.opts.Cluster != nil {
		v.Replica = s.opts.Cluster.Self()
	}
	return mustJSON(v)
}

// watch opens the watcher a stream starts from: after the page's revision
// when it has one (resumed), else (also when that revision has left the
// history) a snapshot; reason says why a snapshot.
func (s *Server) watch(ctx context.Context, after uint64, resume bool) (w *engine.Watcher, resumed bool, reason string, err error) {
	visible := s.visible(ctx)
	if !resume {
		w, err = s.eng.Watch(ctx, engine.WatchOptions{Visible: visible})
		return w, false, "new stream", err
	}
	w, err = s.eng.Watch(ctx, engine.WatchOptions{Since: after + 1, Visible: visible})
	if _, compacted := errors.AsType[*engine.CompactedError](err); compacted {
		s.log.Info("status page: the revision to resume from is no longer retained; sending a new snapshot", "after", after, "err", err)
		w, err = s.eng.Watch(ctx, engine.WatchOptions{Visible: visible})
		return w, false, "compacted", err
	}
	return w, true, "", err
}

// pump turns the watcher's batches into messages, in order, until ctx is
// done or the watcher fails; on an idle watcher it sends a progress
// message. synced says the page already has a complete state (resumed).
func (s *Server) pump(ctx context.Context, w *engine.Watcher, out chan<- message, synced bool) error {
	for {
		b, err := timeout.Call(ctx, s.opts.Clock, s.opts.ProgressInterval, w.Next)
		var m message
		switch {
		case errors.Is(err, timeout.ErrExpired): // idle
			if !synced {
				continue
			}
			rev := w.Progress()
			m = message{event: "progress", id: revID(rev), data: mustJSON(map[string]uint64{"revision": rev}), synced: true}
		case err != nil:
			return err
		case b.Snapshot:
			targets := make([]*targetView, len(b.Events))
			for i := range b.Events {
				targets[i] = s.viewTarget(b.Events[i].Target)
			}
			m = message{event: "snapshot", data: mustJSON(snapshotData{Targets: targets, Complete: b.SnapshotComplete, Revision: b.Revision})}
			if b.SnapshotComplete {
				m.id, synced = revID(b.Revision), true
				if err := send(ctx, out, m); err != nil {
					return err
				}
				// The page has the present; give it the recent past. Only
				// then is it synced (and gets stats): the recent past comes
				// right after the snapshot.
				d, err := s.recent(ctx, b.Revision)
				if err != nil {
					return err
				}
				m = message{event: "recent", data: mustJSON(d), synced: true}
			}
		default:
			events := viewEvents(b.Events)
			for i := range events {
				if v := events[i].Target; v != nil {
					v.Replica = s.opts.ownerOf(v.Name)
				}
			}
			// Every event up to the batch's revision, and up to its last
			// event, has been delivered or filtered out. (The batch's
			// revision can lag its last event when Next runs while the
			// engine publishes.)
			rev := b.Revision
			if n := len(b.Events); n > 0 {
				rev = max(rev, b.Events[n-1].Revision)
			}
			m = message{event: "events", id: revID(rev), data: mustJSON(eventsData{Events: events, Revision: rev}), synced: true}
			synced = true
		}
		if err := send(ctx, out, m); err != nil {
			return err
		}
	}
}

// viewTarget is t as the page lists it, with the replica that probes it.
func (s *Server) viewTarget(t *engine.Target) *targetView {
	v := viewTarget(t)
	v.Replica = s.opts.ownerOf(t.Spec.Name)
	return v
}

// send hands m to the stream's writer, unless ctx is done first.
func send(ctx context.Context, out chan<- message, m message) error {
	select {
	case out <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type snapshotData struct {
	Targets  []*targetView `json:"targets"`
	Complete bool          `json:"complete"`
	Revision uint64        `json:"revision"`
}

type eventsData struct {
	Events   []eventView `json:"events"`
	Revision uint64      `json:"revision"`
}

func revID(rev uint64) string { return strconv.FormatUint(rev, 10) }

// mustJSON encodes v, which is one of this package's views: they always
// encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("ui: encoding %T: %v", v, err))
	}
	return b
}

// eventStream writes server-sent events, each flushed at once and bounded
// by the write timeout.
type eventStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     bytes.Buffer
}

func (s *eventStream) retry(ms int) error {
	s.buf.Reset()
	fmt.Fprintf(&s.buf, "retry: %d\n\n", ms)
	return s.flush()
}

// send writes m. Its data is JSON, which has no raw newline, so it is one
// "data:" line.
func (s *eventStream) send(m message) error {
	s.buf.Reset()
	s.buf.WriteString("event: ")
	s.buf.WriteString(m.event)
	s.buf.WriteByte('\n')
	if m.id != "" {
		s.buf.WriteString("id: ")
		s.buf.WriteString(m.id)
		s.buf.WriteByte('\n')
	}
	s.buf.WriteString("data: ")
	s.buf.Write(m.data)
	s.buf.WriteString("\n\n")
	return s.flush()
}

func (s *eventStream) flush() error {
	// Not every ResponseWriter supports deadlines (a test recorder does
	// not); the write is then only bounded by the server's own timeouts.
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return err
	}
	return s.rc.Flush()
}
