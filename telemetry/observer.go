package telemetry

import (
	"context"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
)

// engineObserver is the engine.Observer of a Telemetry: metrics, then the
// probe span (when tracing), then the log.
type engineObserver struct {
	metrics *probeMetrics
	tracer  *probeTracer // nil: no spans, ProbeStarted returns ctx as is
	log     *eventLog
}

var _ engine.Observer = (*engineObserver)(nil)

// ProbeStarted starts the probe's span when tracing is on.
func (o *engineObserver) ProbeStarted(ctx context.Context, target string, typ probe.Type) context.Context {
	if o.tracer == nil {
		return ctx
	}
	return o.tracer.probeStarted(ctx, target, typ)
}

// ProbeDone counts the probe, ends its span and logs it at debug.
func (o *engineObserver) ProbeDone(ctx context.Context, target string, typ probe.Type, out probe.Outcome) {
	o.metrics.probeDone(ctx, target, typ, out)
	if o.tracer != nil {
		o.tracer.probeDone(ctx, out)
	}
	o.log.probeDone(ctx, target, typ, out)
}

// Published counts transitions and logs the event at info.
func (o *engineObserver) Published(ev *engine.Event) {
	o.metrics.published(ev)
	o.log.published(ev)
}

// Ready records the readiness latency.
func (o *engineObserver) Ready(target string, sinceStart time.Duration) {
	o.metrics.ready(target, sinceStart)
}

// Committed records the transaction's duration.
func (o *engineObserver) Committed(_ int, took time.Duration) { o.metrics.committed(took) }

// WatcherEvicted counts the eviction.
func (o *engineObserver) WatcherEvicted() { o.metrics.watcherEvicted() }

// WatchObserver counts the events a gRPC server sends on its Watch
// streams; it is what the server package calls an Observer. Telemetry's
// ServerObserver makes it; the zero value is not usable. (telemetry does
// not import server: cmd/probed, which passes one to the other, is where
// the types must agree.)
type WatchObserver struct{ metrics *probeMetrics }

// WatchStarted does nothing: MetricWatchers is the engine's count, which
// includes the streams.
func (WatchObserver) WatchStarted() {}

// WatchEnded does nothing, as WatchStarted.
func (WatchObserver) WatchEnded() {}

// EventsSent counts the events sent.
func (o WatchObserver) EventsSent(n int) { o.metrics.eventsSentN(n) }
