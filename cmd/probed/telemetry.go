package main

import (
	"context"
	"flag"
	"log/slog"
	"net/http"

	"google.golang.org/grpc"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/server"
)

// telemetryConfig holds the observability flags (metrics, traces).
type telemetryConfig struct{}

func (c *telemetryConfig) register(fs *flag.FlagSet) {}

func (c *telemetryConfig) validate() error { return nil }

// telemetry is probed's metrics and traces.
type telemetry struct{}

// startTelemetry sets up metrics and traces as cfg says.
func startTelemetry(ctx context.Context, cfg *config, log *slog.Logger) (*telemetry, error) {
	return &telemetry{}, nil
}

// engineObserver observes the engine (nil: nothing to observe).
func (t *telemetry) engineObserver() engine.Observer { return nil }

// serverObserver observes Watch streams (nil: nothing to observe).
func (t *telemetry) serverObserver() server.Observer { return nil }

// grpcOptions instrument the gRPC server.
func (t *telemetry) grpcOptions() []grpc.ServerOption { return nil }

// inject propagates trace context into HTTP probes (nil: none).
func (t *telemetry) inject() func(context.Context, http.Header) { return nil }

// observe starts reporting the engine's gauges.
func (t *telemetry) observe(e *engine.Engine) error { return nil }

// shutdown flushes and stops the exporters.
func (t *telemetry) shutdown(ctx context.Context) error { return nil }
