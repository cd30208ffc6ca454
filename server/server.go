// Package server is probed's gRPC adapter: it converts between the API
// (probe.v1) and the engine, and maps domain errors to gRPC status codes
// in one place (errors.go). Its only state is the count of ApplyTargets
// calls each identity has open (applyslots.go).
package server

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"
	"google.golang.org/grpc"

	"github.com/probed/probed/engine"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// DefaultProgressInterval is how often an idle Watch stream gets a
// progress notification (etcd's progress notify).
const DefaultProgressInterval = 10 * time.Second

// Options tune a Server.
type Options struct {
	Clock            clockwork.Clock // default: real clock
	ProgressInterval time.Duration   // default: DefaultProgressInterval
	Logger           *slog.Logger
	// Observer is told about watch streams, for metrics; may be nil.
	Observer Observer
	// Forwarder, in cluster mode, reaches the owner of a target this
	// replica does not probe (see forward.go); nil on a single node.
	Forwarder Forwarder
	// ReplicaID names this replica (forwarded calls, ListReplicas).
	ReplicaID string
	// Addr is the address this server is reached at (ListReplicas on a
	// single node).
	Addr string
	// Replicas, in cluster mode, tells which replica probes which target
	// and which replicas are live; nil on a single node.
	Replicas Replicas
	// Authorizer, when set, limits each caller to the targets it may read,
	// write and operate (authorize.go); nil allows everything.
	Authorizer Authorizer
	// Limiter, when set, is the per-identity rate limit the interceptors
	// take a token of per call (auth.Limiter): an ApplyTargets set takes
	// one more per ApplyTargetsPerToken targets beyond the first ones.
	Limiter Limiter

	// Bounds of ApplyTargets (applyset.go); 0 means the default.
	MaxApplyBytes       int           // DefaultMaxApplyBytes
	MaxAppliesPerClient int           // DefaultMaxAppliesPerClient
	ApplyIdleTimeout    time.Duration // DefaultApplyIdleTimeout
	ApplyTimeout        time.Duration // DefaultApplyTimeout
}

// A Limiter is a per-identity rate limit (auth.Limiter).
type Limiter interface {
	// Reserve takes a token of identity's bucket, now or the next to come:
	// it returns how long until then, and cancel, which gives it back.
	Reserve(identity string) (wait time.Duration, cancel func())
}

// Observer receives what the server does, for metrics.
type Observer interface {
	// WatchStarted and WatchEnded bracket a Watch stream.
	WatchStarted()
	WatchEnded()
	// EventsSent is called after events were sent on a stream.
	EventsSent(n int)
}

// Server implements probe.v1.ProbeService over an engine.
type Server struct {
	probev1.UnimplementedProbeServiceServer
	engine  *engine.Engine
	opts    Options
	applies applySlots
}

// New returns a server for e.
func New(e *engine.Engine, opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = DefaultProgressInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	opts.MaxApplyBytes = cmp.Or(opts.MaxApplyBytes, DefaultMaxApplyBytes)
	opts.MaxAppliesPerClient = cmp.Or(opts.MaxAppliesPerClient, DefaultMaxAppliesPerClient)
	opts.ApplyIdleTimeout = cmp.Or(opts.ApplyIdleTimeout, DefaultApplyIdleTimeout)
	opts.ApplyTimeout = cmp.Or(opts.ApplyTimeout, DefaultApplyTimeout)
	return &Server{engine: e, opts: opts, applies: applySlots{open: make(map[string]int)}}
}

// Register registers the ProbeService on g.
func (s *Server) Register(g *grpc.Server) {
	probev1.RegisterProbeServiceServer(g, s)
}

type nopObserver struct{}

func (nopObserver) WatchStarted()  {}
func (nopObserver) WatchEnded()    {}
func (nopObserver) EventsSent(int) {}
