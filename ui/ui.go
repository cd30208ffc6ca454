// Package ui is probed's status page: a read-only web page, served from
// files embedded in the binary, that lists every target with its phase,
// its probes' results, periods and recent latencies, and follows the
// engine live.
//
// The page loads once and never polls. GET /api/events is a stream of
// server-sent events fed by the engine's Watch: a snapshot of every
// target, then each change as it is published, every message with
// "id: REVISION" so that a browser that lost the connection resumes where
// it was (EventSource sends Last-Event-ID) with no gap. The figures no
// event carries (last message, latencies, counters) come as "stats"
// messages, computed once per interval for all streams and sent only for
// targets whose probes ran since.
//
// The handler has no authentication of its own: wrap it with the API's.
package ui

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine"
)

// Defaults of Options.
const (
	DefaultStatsInterval    = time.Second
	DefaultProgressInterval = 15 * time.Second
	DefaultWriteTimeout     = 30 * time.Second
	DefaultTimelineWindow   = 5 * time.Minute
)

// Options configure a Server. The zero value is valid.
type Options struct {
	Logger *slog.Logger
	// Clock times the stats and the progress messages; default: the real
	// clock.
	Clock clockwork.Clock
	// StatsInterval is how often the live figures are computed and sent;
	// default DefaultStatsInterval.
	StatsInterval time.Duration
	// ProgressInterval is how long a stream may stay idle before it gets
	// a "progress" message with the current revision (which also keeps
	// proxies from closing it); default DefaultProgressInterval.
	ProgressInterval time.Duration
	// WriteTimeout bounds each write to a stream: a browser that stops
	// reading is disconnected. Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// TargetJSON encodes a target for /api/targets/NAME and the detail
	// panel's spec. probed sets server.TargetJSON, the API's JSON form
	// (what `probectl get NAME -o json` prints); the page itself links no
	// gRPC. Default: the page's own view of the target.
	TargetJSON func(*engine.Target) ([]byte, error)
	// TimelineWindow is how far back the targets' readiness timelines
	// go; default DefaultTimelineWindow.
	TimelineWindow time.Duration
	// Cluster, in cluster mode, tells which replica probes each target
	// and which replicas are live; the page shows both. Nil on a single
	// node.
	Cluster Cluster
	// Visible, when set, returns the read filter of the caller of a
	// request's context (probed --authz-policy): the page, its streams
	// and /api/targets show only the targets it accepts. A filter reads
	// the policy in force, so a stream drops the events of targets its
	// caller can no longer read. Nil: every target.
	Visible func(ctx context.Context) func(name string) bool
}

// visible is the read filter of the caller of ctx (nil: every target).
func (s *Server) visible(ctx context.Context) func(name string) bool {
	if s.opts.Visible == nil {
		return nil
	}
	return s.opts.Visible(ctx)
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.StatsInterval <= 0 {
		o.StatsInterval = DefaultStatsInterval
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = DefaultProgressInterval
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.TargetJSON == nil {
		o.TargetJSON = viewJSON
	}
	if o.TimelineWindow <= 0 {
		o.TimelineWindow = DefaultTimelineWindow
	}
}

// Server is the status page's HTTP handler. Run must be running for the
// pages to receive live figures (stats); everything else works without it.
type Server struct {
	eng   *engine.Engine
	opts  Options
	log   *slog.Logger
	mux   *http.ServeMux
	stats *statsHub
}

// New returns the status page of e.
//
// Routes (GET and HEAD only):
//
//	/                         the page (index.html, app.js, app.css, favicon.svg)
//	/api/events               the event stream (see the package doc)
//	/api/targets/NAME         the target as Options.TargetJSON encodes it
//	/api/targets/NAME/events  the target's last events retained in the history
func New(e *engine.Engine, opts Options) *Server {
	opts.setDefaults()
	s := &Server{eng: e, opts: opts, log: opts.Logger, stats: newStatsHub(e, opts.Cluster, opts.Logger)}
	mux := http.NewServeMux()
	for path, a := range assets {
		mux.Handle("GET "+path, a)
	}
	mux.HandleFunc("GET /api/events", s.serveEvents)
	mux.HandleFunc("GET /api/targets/{name}", s.serveTarget)
	mux.HandleFunc("GET /api/targets/{name}/events", s.serveTargetEvents)
	s.mux = mux
	return s
}

// ServeHTTP serves the page and its API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Everything the page loads comes from here: no CDN, no inline code.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	s.mux.ServeHTTP(w, r)
}

// Run computes the live figures for the connected pages every
// StatsInterval (nothing while none is connected) until ctx is done.
func (s *Server) Run(ctx context.Context) {
	s.stats.run(ctx, s.opts.Clock, s.opts.StatsInterval)
}
