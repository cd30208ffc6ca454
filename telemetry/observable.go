package telemetry

import "go.opentelemetry.io/otel/metric"

// observables makes the observable instruments of one group of metrics
// (ObserveCluster, ObserveConnections) on meter; the first error stops
// the others and is kept in err.
type observables struct {
	meter metric.Meter
	err   error
}

func (o *observables) gauge(name, desc string) metric.Int64ObservableGauge {
	var g metric.Int64ObservableGauge
	if o.err == nil {
		g, o.err = o.meter.Int64ObservableGauge(name, metric.WithDescription(desc))
	}
	return g
}

func (o *observables) counter(name, desc string) metric.Int64ObservableCounter {
	var c metric.Int64ObservableCounter
	if o.err == nil {
		c, o.err = o.meter.Int64ObservableCounter(name, metric.WithDescription(desc))
	}
	return c
}
