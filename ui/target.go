package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/probed/probed/engine"
)

// targetEvents is how many of a target's last events
// /api/targets/NAME/events returns at most.
const targetEvents = 100

// serveTarget writes the target as Options.TargetJSON encodes it.
func (s *Server) serveTarget(w http.ResponseWriter, r *http.Request) {
	if !s.readable(w, r) {
		return
	}
	t, err := s.eng.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		s.fail(w, err)
		return
	}
	b, err := s.opts.TargetJSON(t)
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}

// serveTargetEvents writes {"events":[...]}: the target's last events
// retained in the history, oldest first.
func (s *Server) serveTargetEvents(w http.ResponseWriter, r *http.Request) {
	if !s.readable(w, r) {
		return
	}
	events, err := s.history(r.Context(), r.PathValue("name"), targetEvents)
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(mustJSON(struct {
		Events []eventView `json:"events"`
	}{events}))
}

// history returns the last n events about name that the engine's history
// retains, oldest first (also those of a deleted target by that name).
func (s *Server) history(ctx context.Context, name string, n int) ([]eventView, error) {
	last := newLastN[engine.Event](n)
	err := s.scanHistory(ctx, []string{name}, s.eng.Revision(), func(ev *engine.Event) {
		last.add(*ev)
	})
	if err != nil {
		return nil, err
	}
	return viewEvents(last.values()), nil
}

// viewJSON is the default Options.TargetJSON: the page's own view of t,
// indented.
func viewJSON(t *engine.Target) ([]byte, error) {
	return json.MarshalIndent(viewTarget(t), "", "  ")
}

// readable reports whether the caller may read the target of the
// request's path; if not, it answers 404, as for a target that does not
// exist (the page says nothing about what the caller may not read).
func (s *Server) readable(w http.ResponseWriter, r *http.Request) bool {
	if v := s.visible(r.Context()); v != nil && !v(r.PathValue("name")) {
		s.fail(w, fmt.Errorf("target %q: %w", r.PathValue("name"), engine.ErrNotFound))
		return false
	}
	return true
}

// fail writes err as a JSON error with the status it maps to.
func (s *Server) fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, engine.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, engine.ErrResourceExhausted):
		code = http.StatusTooManyRequests // e.g. too many watchers
	case errors.Is(err, engine.ErrClosed), errors.Is(err, context.Canceled):
		code = http.StatusServiceUnavailable
	default:
		s.log.Error("status page: request failed", "err", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(mustJSON(map[string]string{"error": err.Error()}))
}
