// Package xds serves probed's targets as services to load balancers over
// xDS v3 (the aggregated discovery service, State of the World and
// incremental), so that proxyless gRPC clients (xds:///SERVICE.NAMESPACE)
// and Envoy route only to the endpoints probed finds ready.
//
// A target NAMESPACE/NAME labelled probed.io/service=SERVICE is an
// endpoint of the service SERVICE.NAMESPACE, at the host of its readiness
// probe and its port (or the port labelled probed.io/serving-port). Every
// service has a listener (an API listener for gRPC), a cluster of type EDS
// and a ClusterLoadAssignment of the same name; the assignment holds the
// ready endpoints, HEALTHY. The model follows the engine's event stream
// in process (each change is pushed from the event that publishes it) and
// every response's version is the revision of the event log it reflects.
//
// Like server/, this is an adapter: it maps the engine to a protocol and
// is the only place that knows xDS.
package xds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/delta/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/sotw/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/engine"
)

// anyType is the type URL of ADS streams (every type on one stream).
const anyType = ""

// VerbRead is the verb of the authorization policy a client needs on a
// target to see it as an endpoint (server.VerbRead).
const VerbRead = "read"

// An Authorizer decides which targets an identity may read (probed
// --authz-policy); server.Authorizer is one.
type Authorizer interface {
	// Allowed reports whether identity may do verb to the target name.
	Allowed(identity, verb, name string) bool
	// Grants describes what identity may do: equal descriptions, equal
	// access.
	Grants(identity string) string
	// Changed returns a channel closed the next time the policy changes.
	Changed() <-chan struct{}
}

// Defaults of Options.
const (
	DefaultCatchUpWait = 5 * time.Second
	DefaultMaxStreams  = 10000
	// retryDelay is how long the model waits before following the engine
	// again after its watch failed (a replica that cannot vouch for its
	// view).
	retryDelay = time.Second
	// followBuffer bounds the events the model's own watcher may have
	// pending: the model applies them as fast as they come.
	followBuffer = 1 << 20
)

// Options configure a Server.
type Options struct {
	// Authorizer, when set, limits what each stream sees to the targets
	// its caller's identity may read (engine.ClientFrom of the stream's
	// context, set by the authentication interceptors).
	Authorizer Authorizer
	Logger     *slog.Logger
	// SendUnready sends the endpoints of targets that are not ready as
	// UNHEALTHY (DRAINING while terminating) instead of leaving them out.
	SendUnready bool
	// EndpointStaleAfter, when positive, is every assignment's
	// endpoint_stale_after (Envoy marks the endpoints unhealthy when no
	// update came for that long), and assignments are sent again every
	// third of it.
	EndpointStaleAfter time.Duration
	// CatchUpWait is how long a client that saw a newer revision than
	// this server's (a reconnect to a replica a little behind) waits for
	// this server to reach it before it is answered anyway; default
	// DefaultCatchUpWait.
	CatchUpWait time.Duration
	// MaxStreams bounds the xDS streams open at once (0: no bound); past
	// it a stream fails with ResourceExhausted.
	MaxStreams int
}

// Server is the xDS server. Register it on a gRPC server, and Run it.
type Server struct {
	eng   *engine.Engine
	opts  Options
	model *model
	stats counters
	done  chan struct{} // closed when Run returns: streams end
	once  sync.Once
}

// New returns a Server over eng.
func New(eng *engine.Engine, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CatchUpWait <= 0 {
		opts.CatchUpWait = DefaultCatchUpWait
	}
	s := &Server{eng: eng, opts: opts, done: make(chan struct{})}
	s.model = newModel(&s.opts)
	return s
}

// Register registers the aggregated discovery service on g.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	discovery.RegisterAggregatedDiscoveryServiceServer(g, ads{s})
}

// ads is the gRPC service.
type ads struct{ s *Server }

// StreamAggregatedResources serves a State of the World ADS stream.
func (a ads) StreamAggregatedResources(stream grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) error {
	return a.s.serve(stream.Context(), func(ctx context.Context, st *xdsStream) error {
		return sotw.NewServer(ctx, st, st, sotw.WithLogger(logger{a.s.opts.Logger})).StreamHandler(stream, anyType)
	})
}

// DeltaAggregatedResources serves an incremental ADS stream.
func (a ads) DeltaAggregatedResources(stream grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]) error {
	return a.s.serve(stream.Context(), func(ctx context.Context, st *xdsStream) error {
		return delta.NewServer(ctx, st, st, delta.WithLogger(logger{a.s.opts.Logger})).DeltaStreamHandler(stream, anyType)
	})
}

// errStopping ends the streams when probed stops.
var errStopping = status.Error(codes.Unavailable, "probed is shutting down")

// serve runs one stream with handle, for the identity of ctx, until the
// client leaves or the server stops.
func (s *Server) serve(ctx context.Context, handle func(context.Context, *xdsStream) error) error {
	select {
	case <-s.done:
		return errStopping
	default:
	}
	if n := s.stats.streams.Add(1); s.opts.MaxStreams > 0 && n > int64(s.opts.MaxStreams) {
		s.stats.streams.Add(-1)
		return status.Error(codes.ResourceExhausted, fmt.Sprintf("at most %d xDS streams may be open at once (--xds-max-streams)", s.opts.MaxStreams))
	}
	defer s.stats.streams.Add(-1)
	st := &xdsStream{
		s:         s,
		access:    &access{auth: s.opts.Authorizer, id: engine.ClientFrom(ctx)},
		sent:      make(map[string]bool),
		refreshed: make(map[string]uint64),
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	})
	err := handle(ctx, st)
	select {
	case <-s.done:
		return errStopping
	default:
	}
	return err
}

// Run follows the engine until ctx is done or the engine stops, pushing
// every change to the streams; the streams end (Unavailable) when it
// returns.
func (s *Server) Run(ctx context.Context) error {
	defer s.once.Do(func() { close(s.done) })
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	if s.opts.Authorizer != nil {
		changed := s.opts.Authorizer.Changed() // before any view is built from the policy
		wg.Go(func() { s.followPolicy(ctx, changed) })
	}
	if s.opts.EndpointStaleAfter > 0 {
		wg.Go(func() { s.refresh(ctx) })
	}
	return s.follow(ctx)
}

// follow applies the engine's events to the model: a snapshot first,
// then every batch as it is published. A watch that ends is opened again
// from the next revision (or from a new snapshot when that one is gone).
func (s *Server) follow(ctx context.Context) error {
	var since uint64
	for {
		w, err := s.eng.Watch(engine.WithClient(ctx, ""), engine.WatchOptions{Since: since, Buffer: followBuffer})
		if err == nil {
			err = s.followWatcher(ctx, w, since == 0)
			w.Close()
		}
		slow, isSlow := errors.AsType[*engine.SlowWatcherError](err)
		switch {
		case ctx.Err() != nil, errors.Is(err, engine.ErrClosed):
			return nil //nolint:nilerr // stopped or closed: the follower ends normally

		case isSlow:
			since = slow.LastRevision + 1
			continue
		case errors.Is(err, engine.ErrCompacted):
			since = 0
			continue
		}
		s.opts.Logger.Warn("xds: cannot follow the engine; pushes wait until it can be followed again", "err", err, "retry_in", retryDelay)
		if rev, loaded := s.model.position(); loaded {
			since = rev + 1
		}
		t := time.NewTimer(retryDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// followWatcher applies w's batches until it fails.
func (s *Server) followWatcher(ctx context.Context, w *engine.Watcher, fresh bool) error {
	var snapshot map[string]*engine.Target
	if fresh {
		snapshot = make(map[string]*engine.Target)
	}
	md := s.model
	for {
		b, err := w.Next(ctx)
		if err != nil {
			return err
		}
		if b.Snapshot {
			for i := range b.Events {
				snapshot[b.Events[i].Name] = b.Events[i].Target
			}
			if b.SnapshotComplete {
				md.mu.Lock()
				md.replaceLocked(snapshot, b.Revision)
				md.mu.Unlock()
				snapshot = nil
			}
			continue
		}
		var c change
		md.mu.Lock()
		for i := range b.Events {
			md.applyLocked(&b.Events[i], &c)
		}
		md.rev = max(md.rev, b.Revision)
		md.notifyLocked(&c)
		md.mu.Unlock()
	}
}

// position returns the model's revision, and whether it is loaded.
func (md *model) position() (uint64, bool) {
	md.mu.Lock()
	defer md.mu.Unlock()
	return md.rev, md.loaded
}

// followPolicy evaluates every watch again when the policy changes,
// from changed, the policy's Changed channel taken before any view was
// built. Each change's channel is taken again before the views are
// dropped, so a change that lands while they are dropped or rebuilt is
// not missed (the views it leaves are dropped once more).
func (s *Server) followPolicy(ctx context.Context, changed <-chan struct{}) {
	md := s.model
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		changed = s.opts.Authorizer.Changed()
		md.mu.Lock()
		md.policy++
		for _, svc := range md.services {
			svc.views = nil
		}
		md.notifyLocked(&change{structural: true})
		md.mu.Unlock()
	}
}

// refresh sends every assignment again each third of
// EndpointStaleAfter, so that Envoy does not take them for stale.
func (s *Server) refresh(ctx context.Context) {
	t := time.NewTicker(s.opts.EndpointStaleAfter / 3)
	defer t.Stop()
	md := s.model
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		md.mu.Lock()
		md.refresh++
		for w := range md.watches {
			if w.typ == EndpointType && md.evaluateLocked(w) {
				md.dropLocked(w)
			}
		}
		md.mu.Unlock()
	}
}

// counters are the server's running figures.
type counters struct {
	streams atomic.Int64
	acks    atomic.Uint64
	nacks   atomic.Uint64
	mu      sync.Mutex
	pushes  map[string]uint64
	bytes   map[string]uint64
}

func (c *counters) push(typ string, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pushes == nil {
		c.pushes, c.bytes = make(map[string]uint64), make(map[string]uint64)
	}
	c.pushes[typ]++
	c.bytes[typ] += uint64(size)
}

// Stats are the figures of a Server.
type Stats struct {
	// Streams open now.
	Streams int64
	// Pushes and PushBytes: responses sent, and their bytes, by type URL.
	Pushes, PushBytes map[string]uint64
	// ACKs and NACKs received.
	ACKs, NACKs uint64
	// Services, and their endpoints sent (healthy, or any with
	// SendUnready).
	Services, Endpoints int
	// Excluded counts the targets that name a service but are left out
	// of it, by reason (Reason*).
	Excluded map[string]int
	// Revision is the revision of the event log the model is at; Loaded
	// says it has its first snapshot.
	Revision uint64
	Loaded   bool
}

// Stats returns the server's figures.
func (s *Server) Stats() Stats {
	st := Stats{Streams: s.stats.streams.Load(), ACKs: s.stats.acks.Load(), NACKs: s.stats.nacks.Load(),
		Pushes: make(map[string]uint64), PushBytes: make(map[string]uint64)}
	s.stats.mu.Lock()
	for k, v := range s.stats.pushes {
		st.Pushes[k] = v
		st.PushBytes[k] = s.stats.bytes[k]
	}
	s.stats.mu.Unlock()
	st.Services, st.Endpoints, st.Excluded = s.model.counts()
	st.Revision, st.Loaded = s.model.position()
	return st
}

// logger is go-control-plane's logger over slog, at debug level (its
// messages are per request).
type logger struct{ l *slog.Logger }

func (l logger) Debugf(format string, args ...any) { l.l.Debug("xds: " + fmt.Sprintf(format, args...)) }
func (l logger) Infof(format string, args ...any)  { l.l.Debug("xds: " + fmt.Sprintf(format, args...)) }
func (l logger) Warnf(format string, args ...any)  { l.l.Debug("xds: " + fmt.Sprintf(format, args...)) }
func (l logger) Errorf(format string, args ...any) { l.l.Warn("xds: " + fmt.Sprintf(format, args...)) }
