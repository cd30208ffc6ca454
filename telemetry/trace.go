package telemetry

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/probed/probed/engine/probe"
)

// The attributes of probe spans.
const (
	AttrTarget          = "probed.target"
	AttrProbeType       = "probed.probe.type"
	AttrProbeResult     = "probed.probe.result"
	AttrProbeMessage    = "probed.probe.message"
	AttrPhaseDNS        = "probed.probe.phase.dns_seconds"
	AttrPhaseConnect    = "probed.probe.phase.connect_seconds"
	AttrPhaseTLS        = "probed.probe.phase.tls_seconds"
	AttrPhaseFirstByte  = "probed.probe.phase.first_byte_seconds"
	spanNamePrefix      = "probe "
	maxMessageAttrBytes = 1 << 10
)

// probeTracer makes a span per probe execution.
type probeTracer struct {
	tracer trace.Tracer
	names  [probe.NumTypes]string
	types  [probe.NumTypes]attribute.KeyValue
	start  []trace.SpanStartOption
}

func newProbeTracer(t trace.Tracer) *probeTracer {
	pt := &probeTracer{tracer: t, start: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}}
	for _, typ := range probe.Types {
		pt.names[typ] = spanNamePrefix + typ.String()
		pt.types[typ] = attribute.String(AttrProbeType, typ.String())
	}
	return pt
}

// probeStarted starts the span of a probe execution; the returned context
// carries it (unsampled spans too, so that their trace context can be
// propagated).
func (pt *probeTracer) probeStarted(ctx context.Context, target string, typ probe.Type) context.Context {
	ti, ok := typeIndex(typ)
	if !ok {
		return ctx
	}
	ctx, span := pt.tracer.Start(ctx, pt.names[ti], pt.start...)
	if span.IsRecording() {
		span.SetAttributes(attribute.String(AttrTarget, target), pt.types[ti])
	}
	return ctx
}

// probeDone ends the span probeStarted put in ctx.
func (pt *probeTracer) probeDone(ctx context.Context, out probe.Outcome) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		span.End()
		return
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, attribute.String(AttrProbeResult, out.Result.String()))
	if out.Message != "" {
		msg := out.Message
		if len(msg) > maxMessageAttrBytes {
			msg = msg[:maxMessageAttrBytes]
		}
		attrs = append(attrs, attribute.String(AttrProbeMessage, msg))
	}
	for _, p := range [...]struct {
		key string
		d   time.Duration
	}{
		{AttrPhaseDNS, out.Phases.DNS},
		{AttrPhaseConnect, out.Phases.Connect},
		{AttrPhaseTLS, out.Phases.TLS},
		{AttrPhaseFirstByte, out.Phases.FirstByte},
	} {
		if p.d > 0 {
			attrs = append(attrs, attribute.Float64(p.key, p.d.Seconds()))
		}
	}
	span.SetAttributes(attrs...)
	if out.Result != probe.Success {
		span.SetStatus(codes.Error, out.Result.String())
	}
	span.End()
}

// injector returns a function that writes the W3C trace context of ctx
// into h (for check.Options.Inject).
func injector(p propagation.TextMapPropagator) func(context.Context, http.Header) {
	return func(ctx context.Context, h http.Header) {
		p.Inject(ctx, propagation.HeaderCarrier(h))
	}
}
