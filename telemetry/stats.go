package telemetry

import (
	"context"
	"math"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/wheel"
)

// statsMetrics are the asynchronous instruments, all read from one
// engine.Stats snapshot per collection by one callback.
type statsMetrics struct {
	targets    metric.Int64ObservableGauge
	scheduled  metric.Int64ObservableGauge
	inflight   metric.Int64ObservableGauge
	cancelling metric.Int64ObservableGauge
	watchers   metric.Int64ObservableGauge
	fires      metric.Int64ObservableCounter
	skipped    metric.Int64ObservableCounter
	missed     metric.Int64ObservableCounter
	wakes      metric.Int64ObservableCounter
	errors     metric.Int64ObservableCounter
	panics     metric.Int64ObservableCounter
	changes    metric.Int64ObservableCounter
	refused    metric.Int64ObservableCounter
	// unavailable counts commits that failed for want of space.
	unavailable metric.Int64ObservableCounter

	active, terminating         []metric.ObserveOption // phase=...
	overlap, busy, write, lease []metric.ObserveOption // reason=...

	// lateness exposes the wheel's own lateness histogram.
	lateness *latenessProducer
}

func newStatsMetrics(m metric.Meter, lateness *latenessProducer) (*statsMetrics, error) {
	sm := &statsMetrics{lateness: lateness}
	var err error
	g := func(name, desc string) metric.Int64ObservableGauge {
		var inst metric.Int64ObservableGauge
		if err == nil {
			inst, err = m.Int64ObservableGauge(name, metric.WithDescription(desc))
		}
		return inst
	}
	c := func(name, desc string) metric.Int64ObservableCounter {
		var inst metric.Int64ObservableCounter
		if err == nil {
			inst, err = m.Int64ObservableCounter(name, metric.WithDescription(desc))
		}
		return inst
	}
	sm.targets = g(MetricTargets, "Targets, by phase (active or terminating).")
	sm.scheduled = g(MetricScheduled, "Probes scheduled on the timer wheel.")
	sm.inflight = g(MetricInflight, "Probes running now.")
	sm.cancelling = g(MetricCancelling, "Probe runs cancelled (timeout passed, or the probe was stopped) whose check has not returned yet; stays near 0 unless a checker ignores cancellation.")
	sm.watchers = g(MetricWatchers, "Open watchers (Watch streams and internal ones).")
	sm.fires = c(MetricSchedulerFires, "Due probes the timer wheel handed out.")
	sm.skipped = c(MetricSchedulerSkipped, "Due probes not run: reason overlap (the previous run of the probe was still going), busy (--max-inflight probes were running), write (the probe's last transition was not yet written: the store is behind) or lease (cluster mode: the replica's lease is over by its local deadline).")
	sm.missed = c(MetricSchedulerMissed, "Grid points the timer wheel passed over while it was behind.")
	sm.wakes = c(MetricSchedulerWakes, "Times the timer wheel's driver woke up (its timer fired, or an insert before the tick it slept until woke it); divide by the fires for the wake-ups per fire.")
	sm.errors = c(MetricSchedulerErrors, "Probes the timer wheel refused to schedule: they do not run (each is logged).")
	sm.panics = c(MetricCheckerPanics, "Checker panics recovered (the run counts as unknown).")
	sm.refused = c(MetricStoreRefused, "Changes the store refused: fenced writes of targets this replica no longer owns (cluster mode), creates of names that exist.")
	sm.unavailable = c(MetricStoreUnavailable, "Store transactions that failed because the store could not write for now (its disk full): their changes are held (unpublished) and retried, and creates, updates and deletes are refused meanwhile.")
	sm.changes = c(MetricStoreChanges, "Changes written to the store (divide by the commit count for the group-commit batch size).")
	if err != nil {
		return nil, err
	}
	opt := func(k, v string) []metric.ObserveOption {
		return []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(attribute.String(k, v)))}
	}
	sm.active, sm.terminating = opt("phase", "active"), opt("phase", "terminating")
	sm.overlap, sm.busy, sm.write = opt(labelReason, "overlap"), opt(labelReason, "busy"), opt(labelReason, "write")
	sm.lease = opt(labelReason, "lease")
	return sm, nil
}

// register registers the one callback that reads stats for every
// instrument; unregister it with the returned Registration.
func (sm *statsMetrics) register(m metric.Meter, stats func() engine.Stats) (metric.Registration, error) {
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := stats()
		sm.lateness.update(s.Wheel.Lateness)
		o.ObserveInt64(sm.targets, int64(s.Targets-s.Terminating), sm.active...)
		o.ObserveInt64(sm.targets, int64(s.Terminating), sm.terminating...)
		o.ObserveInt64(sm.scheduled, int64(s.Wheel.Scheduled))
		o.ObserveInt64(sm.inflight, s.Inflight)
		o.ObserveInt64(sm.cancelling, s.Cancelling)
		o.ObserveInt64(sm.watchers, int64(s.Watchers))
		o.ObserveInt64(sm.fires, clampInt64(s.Wheel.Fires))
		o.ObserveInt64(sm.skipped, clampInt64(s.SkippedOverlap), sm.overlap...)
		o.ObserveInt64(sm.skipped, clampInt64(s.SkippedBusy), sm.busy...)
		o.ObserveInt64(sm.skipped, clampInt64(s.SkippedWrite), sm.write...)
		o.ObserveInt64(sm.skipped, clampInt64(s.SkippedLease), sm.lease...)
		o.ObserveInt64(sm.missed, clampInt64(s.Wheel.Missed))
		o.ObserveInt64(sm.wakes, clampInt64(s.Wheel.Wakes))
		o.ObserveInt64(sm.errors, clampInt64(s.ScheduleErrors))
		o.ObserveInt64(sm.panics, clampInt64(s.Panics))
		o.ObserveInt64(sm.changes, clampInt64(s.Changes))
		o.ObserveInt64(sm.refused, clampInt64(s.Refused))
		o.ObserveInt64(sm.unavailable, clampInt64(s.StoreUnavailable))
		return nil
	}, sm.targets, sm.scheduled, sm.inflight, sm.cancelling, sm.watchers, sm.fires, sm.skipped, sm.missed, sm.wakes, sm.errors, sm.panics, sm.changes, sm.refused, sm.unavailable)
}

func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// latenessProducer exposes the timer wheel's lateness histogram, which the
// wheel keeps itself (cheaply, per shard), as the cumulative histogram
// MetricSchedulerLateness: the OpenTelemetry API has no asynchronous
// histogram, so it is a metric Producer. It exports the snapshot the stats
// callback took during the same collection (callbacks run before
// producers), so engine.Stats is read once per collection.
type latenessProducer struct {
	scope  instrumentation.Scope
	bounds []float64 // the finite bounds, in seconds

	mu    sync.Mutex
	start time.Time       // when the histogram started counting; zero until the first update
	last  wheel.Histogram // the newest snapshot; guarded by mu
}

func newLatenessProducer(scope instrumentation.Scope) *latenessProducer {
	return &latenessProducer{scope: scope}
}

// update keeps h if it is at least as new as the snapshot held (snapshots
// of concurrent collections may arrive out of order; counts only go up).
func (p *latenessProducer) update(h wheel.Histogram) {
	if h.Count() == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.start.IsZero() {
		p.start = time.Now()
		p.bounds = make([]float64, wheel.NumLatenessBuckets-1) // the last is +Inf
		for i := range p.bounds {
			p.bounds[i] = h.Bounds[i].Seconds()
		}
	}
	if h.Count() >= p.last.Count() {
		p.last = h
	}
}

// reset forgets the snapshot held, for a new source whose counts start
// from zero: the next one starts a new cumulative series.
func (p *latenessProducer) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.start, p.last = time.Time{}, wheel.Histogram{}
}

// Produce implements metric.Producer.
func (p *latenessProducer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	p.mu.Lock()
	h, start, bounds := p.last, p.start, p.bounds
	p.mu.Unlock()
	if start.IsZero() {
		return nil, nil
	}
	counts := make([]uint64, wheel.NumLatenessBuckets)
	var prev uint64
	for i, c := range h.Counts {
		counts[i] = c - prev
		prev = c
	}
	return []metricdata.ScopeMetrics{{
		Scope: p.scope,
		Metrics: []metricdata.Metrics{{
			Name:        MetricSchedulerLateness,
			Description: "Time from a probe's due time to its collection by the timer wheel (the wheel's own histogram).",
			Unit:        "s",
			Data: metricdata.Histogram[float64]{
				Temporality: metricdata.CumulativeTemporality,
				DataPoints: []metricdata.HistogramDataPoint[float64]{{
					Attributes:   *attribute.EmptySet(),
					StartTime:    start,
					Time:         time.Now(),
					Count:        h.Count(),
					Bounds:       bounds,
					BucketCounts: counts,
					Sum:          h.Sum.Seconds(),
				}},
			},
		}},
	}}, nil
}
