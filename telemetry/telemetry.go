// Package telemetry is probed's observability: OpenTelemetry metrics (a
// Prometheus endpoint, and OTLP when the standard OTEL_EXPORTER_OTLP_*
// variables say where), a span per probe execution and per gRPC call, and
// the logs an operator follows — one line per transition at info, one per
// probe at debug with repeated failures summarised.
//
// A Telemetry is built by New from a Config, observes the engine through
// Observer (and its counters through Observe), the gRPC server through
// ServerObserver and GRPCServerOptions, propagates trace context into HTTP
// probes through Inject, serves Prometheus through Handler, and must be
// stopped with Shutdown.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"

	"github.com/probed/probed/engine"
)

// ScopeName is the instrumentation scope of probed's own metrics and
// spans.
const ScopeName = "github.com/probed/probed/telemetry"

// Config says what a Telemetry does. The zero value collects metrics
// nowhere (unless the OTLP variables are set), traces nothing and logs
// nothing.
type Config struct {
	// Service and Version name the process in the resource
	// (service.name, service.version); OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES override them. Default Service: "probed".
	Service, Version string
	// Logger receives the event and probe logs, and telemetry's own
	// warnings. Default: discard.
	Logger *slog.Logger
	// Clock times the summary of repeated failures in the logs. Default:
	// the real clock.
	Clock clockwork.Clock
	// RepeatInterval is how often a probe failing again and again with the
	// same message is logged (at debug). Default DefaultRepeatInterval.
	RepeatInterval time.Duration

	// Prometheus makes Handler serve the metrics in the Prometheus format.
	Prometheus bool
	// TargetLabel adds the target label to the per-probe families (probe
	// counts and durations, HTTP phases, transitions, readiness latency).
	// Every target ever probed then stays a series until the process
	// ends: use it with a bounded set of targets.
	TargetLabel bool

	// TraceRatio is the fraction of probe executions (and of gRPC calls
	// without a sampled parent) traced; 0 makes no probe span at all.
	TraceRatio float64
	// Propagate makes Inject send the W3C trace context to HTTP targets.
	// Every probe then gets a span context (unsampled ones included, with
	// the sampled flag off), even with TraceRatio 0.
	Propagate bool

	// OTLP exporters are built when the environment asks for them:
	// OTEL_EXPORTER_OTLP_ENDPOINT, or the _METRICS_ / _TRACES_ variant,
	// is set and OTEL_METRICS_EXPORTER / OTEL_TRACES_EXPORTER is not
	// "none". Only the grpc protocol is supported. The exporters read
	// the rest of their configuration (headers, TLS, timeout, interval)
	// from the environment themselves.

	// Reader, if set, builds one more metric reader (tests: a
	// ManualReader); it should give it producer (sdkmetric.WithProducer),
	// the source of the scheduler lateness histogram.
	Reader func(producer sdkmetric.Producer) sdkmetric.Reader
	// SpanProcessors receive every span (tests: a tracetest.SpanRecorder).
	SpanProcessors []sdktrace.SpanProcessor
}

// Telemetry is probed's metrics, traces and logs. Its methods are safe for
// concurrent use.
type Telemetry struct {
	log        *slog.Logger
	meters     *sdkmetric.MeterProvider
	tracers    trace.TracerProvider
	sdkTracers *sdktrace.TracerProvider // nil when nothing is traced
	meter      metric.Meter
	propagator propagation.TextMapPropagator
	propagate  bool
	registry   *prometheus.Registry // nil without Prometheus
	instrument bool                 // some reader or span processor exists

	metrics  *probeMetrics
	stats    *statsMetrics
	calls    *callMetrics // nil when otelgrpc instruments the server (spans)
	observer *engineObserver

	mu          sync.Mutex
	observation metric.Registration // guarded by mu
	shut        bool                // guarded by mu
}

// New builds the providers and exporters cfg asks for. The caller must
// call Shutdown.
func New(ctx context.Context, cfg Config) (_ *Telemetry, err error) {
	if cfg.TraceRatio < 0 || cfg.TraceRatio > 1 {
		return nil, fmt.Errorf("trace ratio %v: must be between 0 and 1", cfg.TraceRatio)
	}
	if cfg.Service == "" {
		cfg.Service = "probed"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.RepeatInterval <= 0 {
		cfg.RepeatInterval = DefaultRepeatInterval
	}
	otlpMetrics, otlpTraces, err := otlpWanted(os.Getenv)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", cfg.Service), attribute.String("service.version", cfg.Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}

	t := &Telemetry{log: cfg.Logger, propagator: propagation.TraceContext{}, propagate: cfg.Propagate}
	var closers []func(context.Context) error
	defer func() {
		if err != nil {
			for _, c := range closers {
				_ = c(context.WithoutCancel(ctx))
			}
		}
	}()

	// Metrics.
	scope := instrumentation.Scope{Name: ScopeName, Version: cfg.Version}
	lateness := newLatenessProducer(scope)
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	if cfg.TargetLabel {
		mopts = append(mopts, sdkmetric.WithCardinalityLimit(0))
	}
	if cfg.TraceRatio == 0 && os.Getenv("OTEL_METRICS_EXEMPLAR_FILTER") == "" {
		// No probe is sampled: skip looking for a span per measurement.
		mopts = append(mopts, sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
	}
	if cfg.Prometheus {
		t.registry = prometheus.NewRegistry()
		t.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		exp, err := otelprom.New(
			otelprom.WithRegisterer(t.registry),
			otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
			otelprom.WithoutScopeInfo(),
			otelprom.WithProducer(lateness),
		)
		if err != nil {
			return nil, fmt.Errorf("prometheus exporter: %w", err)
		}
		mopts = append(mopts, sdkmetric.WithReader(exp))
	}
	if otlpMetrics {
		exp, err := otlpmetricgrpc.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP metric exporter: %w", err)
		}
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithProducer(lateness))))
		t.log.Info("exporting metrics over OTLP")
	}
	if cfg.Reader != nil {
		mopts = append(mopts, sdkmetric.WithReader(cfg.Reader(lateness)))
	}
	t.meters = sdkmetric.NewMeterProvider(mopts...)
	closers = append(closers, t.meters.Shutdown)
	t.meter = t.meters.Meter(ScopeName, metric.WithInstrumentationVersion(cfg.Version))
	if t.metrics, err = newProbeMetrics(t.meter, cfg.TargetLabel); err != nil {
		return nil, err
	}
	if t.stats, err = newStatsMetrics(t.meter, lateness); err != nil {
		return nil, err
	}
	if err := newBuildInfo(t.meter, cfg.Version); err != nil {
		return nil, err
	}
	t.instrument = cfg.Prometheus || otlpMetrics || cfg.Reader != nil

	// Traces.
	probeSpans := cfg.TraceRatio > 0 || cfg.Propagate
	t.tracers = tracenoop.NewTracerProvider()
	if probeSpans || otlpTraces || len(cfg.SpanProcessors) > 0 {
		topts := []sdktrace.TracerProviderOption{
			sdktrace.WithResource(res),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.TraceRatio))),
		}
		if otlpTraces {
			exp, err := otlptracegrpc.New(ctx)
			if err != nil {
				return nil, fmt.Errorf("OTLP trace exporter: %w", err)
			}
			topts = append(topts, sdktrace.WithBatcher(exp))
			t.log.Info("exporting traces over OTLP", "ratio", cfg.TraceRatio)
		} else if cfg.TraceRatio > 0 && len(cfg.SpanProcessors) == 0 {
			t.log.Warn("probe executions are sampled for tracing but no trace exporter is set: the spans are dropped (set OTEL_EXPORTER_OTLP_ENDPOINT)", "ratio", cfg.TraceRatio)
		}
		for _, sp := range cfg.SpanProcessors {
			topts = append(topts, sdktrace.WithSpanProcessor(sp))
		}
		t.sdkTracers = sdktrace.NewTracerProvider(topts...)
		closers = append(closers, t.sdkTracers.Shutdown)
		t.tracers = t.sdkTracers
		t.instrument = true
	}

	if t.sdkTracers == nil && !strings.Contains(os.Getenv("OTEL_SEMCONV_STABILITY_OPT_IN"), "rpc/") {
		if t.calls, err = newCallMetrics(t.meters); err != nil {
			return nil, err
		}
	}

	t.observer = &engineObserver{
		metrics: t.metrics,
		log:     newEventLog(cfg.Logger, cfg.Clock, cfg.RepeatInterval, DefaultMaxRepeats),
	}
	if probeSpans {
		t.observer.tracer = newProbeTracer(t.tracers.Tracer(ScopeName, trace.WithInstrumentationVersion(cfg.Version)))
	}
	return t, nil
}

// otlpWanted reports which OTLP exporters the environment asks for.
func otlpWanted(getenv func(string) string) (metrics, traces bool, err error) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(v)); p != "" && p != "grpc" {
			return false, false, fmt.Errorf("%s=%s: probed exports OTLP over grpc only", v, p)
		}
	}
	wanted := func(signal string) bool {
		if strings.EqualFold(strings.TrimSpace(getenv("OTEL_"+signal+"_EXPORTER")), "none") {
			return false
		}
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != ""
	}
	return wanted("METRICS"), wanted("TRACES"), nil
}

// Observer returns the engine.Observer that feeds the metrics, the probe
// spans and the logs.
func (t *Telemetry) Observer() engine.Observer { return t.observer }

// ServerObserver returns what counts the events a gRPC server sends on
// its Watch streams: the server's Observer (server.Options.Observer).
func (t *Telemetry) ServerObserver() WatchObserver { return WatchObserver{t.metrics} }

// GRPCServerOptions instrument a gRPC server: the rpc.server metrics per
// call and, when spans are made, a span per call (otelgrpc). None when
// nothing collects them. Without spans (and without an
// OTEL_SEMCONV_STABILITY_OPT_IN asking otelgrpc for the older
// conventions) the metrics come from callMetrics, otelgrpc's series for a
// fraction of its cost: pass these options first, so that a call refused
// by authentication is counted too.
func (t *Telemetry) GRPCServerOptions() []grpc.ServerOption {
	if !t.instrument {
		return nil
	}
	if t.calls != nil {
		return t.calls.serverOptions()
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(t.tracers),
		otelgrpc.WithMeterProvider(t.meters),
		otelgrpc.WithPropagators(t.propagator),
	))}
}

// Inject returns the function that writes a probe's W3C trace context into
// its HTTP request (check.Options.Inject), or nil without Config.Propagate.
func (t *Telemetry) Inject() func(context.Context, http.Header) {
	if !t.propagate {
		return nil
	}
	return injector(t.propagator)
}

// Observe reports the counters and gauges read from stats (engine.Stats
// of the engine, or a part of it): one callback reads them all once per
// collection. Observing again replaces the previous source.
func (t *Telemetry) Observe(stats func() engine.Stats) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shut {
		return errors.New("telemetry: observe after shutdown")
	}
	reg, err := t.stats.register(t.meter, stats)
	if err != nil {
		return fmt.Errorf("telemetry: observe: %w", err)
	}
	if t.observation != nil {
		_ = t.observation.Unregister()
		t.stats.lateness.reset()
	}
	t.observation = reg
	return nil
}

// Handler serves the metrics in the Prometheus text format, or is nil
// without Config.Prometheus.
func (t *Telemetry) Handler() http.Handler {
	if t.registry == nil {
		return nil
	}
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(t.log.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// Shutdown flushes the exporters (a last export reads the stats once more),
// stops them and stops observing; the Telemetry records nothing
// afterwards.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	t.mu.Lock()
	if t.shut {
		t.mu.Unlock()
		return nil
	}
	t.shut = true
	observation := t.observation
	t.observation = nil
	t.mu.Unlock()
	// The meters' last export still reads the stats.
	errs := []error{t.meters.Shutdown(ctx)}
	if observation != nil {
		errs = append(errs, observation.Unregister())
	}
	if t.sdkTracers != nil {
		errs = append(errs, t.sdkTracers.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
