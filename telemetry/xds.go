package telemetry

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metric names of the xDS server (probed --xds-addr).
const (
	MetricXDSStreams   = "probed_xds_streams"
	MetricXDSPushes    = "probed_xds_pushes_total"
	MetricXDSPushBytes = "probed_xds_push_bytes_total"
	MetricXDSRequests  = "probed_xds_requests_total"
	MetricXDSServices  = "probed_xds_services"
	MetricXDSEndpoints = "probed_xds_endpoints"
	MetricXDSExcluded  = "probed_xds_excluded_targets"
)

// XDSStats are the figures of the xDS server.
type XDSStats struct {
	Streams int64
	// Pushes and PushBytes by resource type (listener, cluster,
	// endpoint).
	Pushes, PushBytes map[string]uint64
	ACKs, NACKs       uint64
	// Services served and the endpoints their assignments hold.
	Services, Endpoints int
	// Excluded: targets naming a service left out of it, by reason.
	Excluded map[string]int
}

// ObserveXDS reports the xDS server's figures read from stats, once per
// collection.
func (t *Telemetry) ObserveXDS(stats func() XDSStats) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shut {
		return errors.New("telemetry: observe after shutdown")
	}
	obs := observables{meter: t.meter}
	streams := obs.gauge(MetricXDSStreams, "xDS streams open.")
	pushes := obs.counter(MetricXDSPushes, "xDS responses sent, by resource type.")
	bytes := obs.counter(MetricXDSPushBytes, "Bytes of xDS responses sent, by resource type.")
	requests := obs.counter(MetricXDSRequests, "xDS requests that answered a response: result ack, or nack (the client rejected it and kept what it had).")
	services := obs.gauge(MetricXDSServices, "Services served over xDS (targets labelled probed.io/service).")
	endpoints := obs.gauge(MetricXDSEndpoints, "Endpoints in the services' assignments.")
	excluded := obs.gauge(MetricXDSExcluded, "Targets labelled with a service but left out of it, by reason (no address, not an IP, bad label).")
	if err := obs.err; err != nil {
		return fmt.Errorf("telemetry: observe xds: %w", err)
	}
	attrs := func(k, v string) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String(k, v)))
	}
	ack, nack := attrs("result", "ack"), attrs("result", "nack")
	_, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := stats()
		o.ObserveInt64(streams, s.Streams)
		for typ, n := range s.Pushes {
			o.ObserveInt64(pushes, clampInt64(n), attrs("type", typ))
			o.ObserveInt64(bytes, clampInt64(s.PushBytes[typ]), attrs("type", typ))
		}
		o.ObserveInt64(requests, clampInt64(s.ACKs), ack)
		o.ObserveInt64(requests, clampInt64(s.NACKs), nack)
		o.ObserveInt64(services, int64(s.Services))
		o.ObserveInt64(endpoints, int64(s.Endpoints))
		for reason, n := range s.Excluded {
			o.ObserveInt64(excluded, int64(n), attrs("reason", reason))
		}
		return nil
	}, streams, pushes, bytes, requests, services, endpoints, excluded)
	if err != nil {
		return fmt.Errorf("telemetry: observe xds: %w", err)
	}
	return nil
}
