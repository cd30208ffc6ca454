package telemetry

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// Metric names of the API listener's connection bounds (probed's
// --max-connections, --max-connections-per-ip,
// --max-unauthenticated-connections, --first-call-timeout).
const (
	MetricConnectionsOpen    = "probed_api_connections_open"
	MetricConnectionsPending = "probed_api_connections_pending"
	MetricConnectionsRefused = "probed_api_connections_refused_total"
	MetricConnectionsExpired = "probed_api_connections_expired_total"
)

// ConnectionStats are the figures of the API listener's connection
// bounds.
type ConnectionStats struct {
	Open, Pending    int // connections open now, and those not yet authenticated
	Refused, Expired int // closed at accept over a bound; closed with no authenticated call in time
}

// ObserveConnections reports the API listener's figures read from stats,
// once per collection.
func (t *Telemetry) ObserveConnections(stats func() ConnectionStats) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shut {
		return errors.New("telemetry: observe after shutdown")
	}
	obs := observables{meter: t.meter}
	open := obs.gauge(MetricConnectionsOpen, "API connections open now.")
	pending := obs.gauge(MetricConnectionsPending, "API connections open now that have not made an authenticated call yet.")
	refused := obs.counter(MetricConnectionsRefused, "API connections closed at accept for being over a bound (in all, per IP, unauthenticated).")
	expired := obs.counter(MetricConnectionsExpired, "API connections closed for making no authenticated call within --first-call-timeout.")
	if err := obs.err; err != nil {
		return fmt.Errorf("telemetry: observe connections: %w", err)
	}
	_, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := stats()
		o.ObserveInt64(open, int64(s.Open))
		o.ObserveInt64(pending, int64(s.Pending))
		o.ObserveInt64(refused, int64(s.Refused))
		o.ObserveInt64(expired, int64(s.Expired))
		return nil
	}, open, pending, refused, expired)
	if err != nil {
		return fmt.Errorf("telemetry: observe connections: %w", err)
	}
	return nil
}
