package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/server"
	probedtel "github.com/probed/probed/telemetry"
	"github.com/probed/probed/xds"
)

// metricsPath is where the metrics listener serves Prometheus.
const metricsPath = "/metrics"

// telemetryConfig holds the observability flags (metrics, traces). OTLP
// export is configured by the standard OTEL_EXPORTER_OTLP_* variables.
type telemetryConfig struct {
	metricsAddr string
	targetLabel bool
	traceRatio  float64
	propagate   bool
	pprof       bool

	// listening, if set, is called with the metrics listener's address
	// once it listens (tests use it with --metrics-addr 127.0.0.1:0).
	listening func(net.Addr)
}

func (c *telemetryConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.metricsAddr, "metrics-addr", "127.0.0.1:9464", `listen address of the Prometheus endpoint (path `+metricsPath+`); "" disables it`)
	fs.BoolVar(&c.targetLabel, "metrics-target-label", false, "add a target label to the per-probe metrics (one series per target: mind the cardinality). It names every target to whoever may scrape "+metricsPath+": with --authz-policy, grant the metrics verb only to identities that may know every name")
	fs.Float64Var(&c.traceRatio, "trace-ratio", 0, "fraction of probe executions traced, 0 to 1 (spans are exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set)")
	fs.BoolVar(&c.propagate, "trace-propagate", false, "send the W3C trace context (traceparent) to HTTP probe targets")
	fs.BoolVar(&c.pprof, "pprof", false, "also serve the Go runtime's profiles (net/http/pprof) under "+pprofPath+" on --metrics-addr, protected as "+metricsPath+" is")
}

func (c *telemetryConfig) validate() error {
	if c.traceRatio < 0 || c.traceRatio > 1 {
		return fmt.Errorf("--trace-ratio %v: must be between 0 and 1", c.traceRatio)
	}
	if c.metricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.metricsAddr); err != nil {
			return fmt.Errorf("--metrics-addr %q: %w", c.metricsAddr, err)
		}
	}
	if c.pprof && c.metricsAddr == "" {
		return fmt.Errorf("--pprof serves on the metrics listener: it needs --metrics-addr")
	}
	return nil
}

// telemetry is probed's metrics and traces, and the Prometheus listener.
type telemetry struct {
	tel *probedtel.Telemetry
	log *slog.Logger

	srv *http.Server // nil without --metrics-addr
	wg  sync.WaitGroup
}

// startTelemetry sets up metrics and traces as cfg says and starts serving
// the metrics on --metrics-addr, protected as the API is (sec: its TLS
// certificate, client CA and authentication) and, under --authz-policy,
// to identities granted the metrics verb only.
func startTelemetry(ctx context.Context, cfg *config, sec *security, log *slog.Logger) (*telemetry, error) {
	c := &cfg.telemetry
	tel, err := probedtel.New(ctx, probedtel.Config{
		Version:     buildVersion(),
		Logger:      log,
		Prometheus:  c.metricsAddr != "",
		TargetLabel: c.targetLabel,
		TraceRatio:  c.traceRatio,
		Propagate:   c.propagate,
	})
	if err != nil {
		return nil, err
	}
	t := &telemetry{tel: tel, log: log}
	if c.metricsAddr == "" {
		return t, nil
	}
	lis, err := sec.listenHTTP("--metrics-addr", c.metricsAddr)
	if err != nil {
		_ = tel.Shutdown(ctx)
		return nil, fmt.Errorf("listen on --metrics-addr %s: %w", c.metricsAddr, err)
	}
	sec.listening("--metrics-addr", lis.Addr())
	mux := http.NewServeMux()
	protect := func(h http.Handler) http.Handler { return sec.protectOn(lis, sec.scrapersOnly(h)) }
	mux.Handle("GET "+metricsPath, protect(tel.Handler()))
	if c.pprof {
		handlePprof(mux, protect)
	}
	t.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		// A scraper's keep-alive connection is used every scrape interval;
		// one left idle longer is closed.
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// With TLS the endpoint shares the API's certificate and client CA, as
	// the status page does, so a scraper authenticates as a client would.
	scheme, serveFn := "http", func() error { return t.srv.Serve(lis) }
	if tc := sec.tlsConfig(); tc != nil {
		t.srv.TLSConfig = tc
		scheme, serveFn = "https", func() error { return t.srv.ServeTLS(lis, "", "") }
	}
	t.wg.Go(func() {
		if err := serveFn(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", "err", err)
		}
	})
	log.Info("metrics serving", "url", scheme+"://"+lis.Addr().String()+metricsPath)
	if c.pprof {
		log.Info("pprof serving", "url", scheme+"://"+lis.Addr().String()+pprofPath)
	}
	if c.listening != nil {
		c.listening(lis.Addr())
	}
	return t, nil
}

// engineObserver observes the engine: metrics, probe spans and logs.
func (t *telemetry) engineObserver() engine.Observer { return t.tel.Observer() }

// serverObserver observes Watch streams.
func (t *telemetry) serverObserver() server.Observer { return t.tel.ServerObserver() }

// grpcOptions instrument the gRPC server (per-call metrics, and otelgrpc
// spans when traces are made); pass them first.
func (t *telemetry) grpcOptions() []grpc.ServerOption { return t.tel.GRPCServerOptions() }

// inject propagates trace context into HTTP probes (nil: none).
func (t *telemetry) inject() func(context.Context, http.Header) { return t.tel.Inject() }

// observe starts reporting the engine's gauges and counters.
func (t *telemetry) observe(e *engine.Engine) error { return t.tel.Observe(e.Stats) }

// observeCluster reports the cluster's figures.
func (t *telemetry) observeCluster(stats func() probedtel.ClusterStats) error {
	return t.tel.ObserveCluster(stats)
}

// observeConnections reports the API listener's connection figures.
func (t *telemetry) observeConnections(stats func() probedtel.ConnectionStats) error {
	return t.tel.ObserveConnections(stats)
}

// observeXDS reports the xDS server's figures.
func (t *telemetry) observeXDS(stats func() xds.Stats) error {
	return t.tel.ObserveXDS(func() probedtel.XDSStats {
		s := stats()
		st := probedtel.XDSStats{Streams: s.Streams, ACKs: s.ACKs, NACKs: s.NACKs, Services: s.Services,
			Endpoints: s.Endpoints, Excluded: s.Excluded, Pushes: make(map[string]uint64), PushBytes: make(map[string]uint64)}
		for typ, n := range s.Pushes {
			st.Pushes[xds.TypeName(typ)] += n
			st.PushBytes[xds.TypeName(typ)] += s.PushBytes[typ]
		}
		return st
	})
}

// grpcClientOptions instrument a gRPC client (etcd's): per-call metrics.
func (t *telemetry) grpcClientOptions() []grpc.DialOption { return t.tel.GRPCClientOptions() }

// shutdown stops the metrics listener, then flushes and stops the
// exporters.
func (t *telemetry) shutdown(ctx context.Context) error {
	var err error
	if t.srv != nil {
		err = t.srv.Shutdown(ctx)
		t.wg.Wait()
	}
	return errors.Join(err, t.tel.Shutdown(ctx))
}
