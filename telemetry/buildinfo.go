package telemetry

import (
	"context"
	"runtime"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// MetricBuildInfo is the gauge that says which build runs: always 1, with
// the labels version (Config.Version) and goversion, the Prometheus
// convention (go_build_info, prometheus_build_info).
const MetricBuildInfo = "probed_build_info"

// newBuildInfo registers the build information gauge on m.
func newBuildInfo(m metric.Meter, version string) error {
	if version == "" {
		version = "dev"
	}
	attrs := metric.WithAttributeSet(attribute.NewSet(
		attribute.String("version", version),
		attribute.String("goversion", runtime.Version()),
	))
	_, err := m.Int64ObservableGauge(MetricBuildInfo,
		metric.WithDescription("Always 1: the version of probed and the Go release that built it, as labels."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(1, attrs)
			return nil
		}))
	return err
}
