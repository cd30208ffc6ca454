package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
)

// The names of the metrics, exactly as Prometheus exposes them (the
// exporter adds no suffix: every unit suffix and _total is in the name).
const (
	MetricProbes            = "prober_probe_total"
	MetricProbeDuration     = "prober_probe_duration_seconds"
	MetricHTTPPhase         = "probed_http_probe_phase_seconds"
	MetricTransitions       = "probed_transitions_total"
	MetricReadinessLatency  = "probed_readiness_latency_seconds"
	MetricCommit            = "probed_store_commit_seconds"
	MetricStoreChanges      = "probed_store_changes_total"
	MetricStoreRefused      = "probed_store_refused_total"
	MetricStoreUnavailable  = "probed_store_unavailable_total"
	MetricWatchEventsSent   = "probed_watch_events_sent_total"
	MetricWatchEvictions    = "probed_watch_evictions_total"
	MetricWatchers          = "probed_watchers"
	MetricTargets           = "probed_targets"
	MetricScheduled         = "probed_probes_scheduled"
	MetricInflight          = "probed_probes_inflight"
	MetricCancelling        = "probed_probes_cancelling"
	MetricSchedulerLateness = "probed_scheduler_lateness_seconds"
	MetricSchedulerFires    = "probed_scheduler_fires_total"
	MetricSchedulerSkipped  = "probed_scheduler_skipped_total"
	MetricSchedulerMissed   = "probed_scheduler_missed_total"
	MetricSchedulerWakes    = "probed_scheduler_wakes_total"
	MetricSchedulerErrors   = "probed_scheduler_errors_total"
	MetricCheckerPanics     = "probed_checker_panics_total"
)

// The label names.
const (
	labelProbeType = "probe_type"
	labelResult    = "result"
	labelTarget    = "target"
	labelPhase     = "phase"
	labelFrom      = "from"
	labelTo        = "to"
	labelReason    = "reason"
)

// Bucket boundaries, in seconds.
var (
	// probeBuckets cover a subsecond probe on loopback up to a slow
	// timeout.
	probeBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	// readinessBuckets cover a cold start: from an already running
	// process to a slow JVM.
	readinessBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	// commitBuckets cover a bbolt transaction with its fsyncs.
	commitBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
)

// kubeletTypes and kubeletResults are the label values kubelet's prober
// metrics use, indexed by probe.Type and probe.Result.
var (
	kubeletTypes   = [probe.NumTypes]string{probe.Startup: "Startup", probe.Liveness: "Liveness", probe.Readiness: "Readiness"}
	kubeletResults = [numResults]string{probe.Unknown: "unknown", probe.Success: "successful", probe.Failure: "failed"}
)

// numResults is the number of probe.Result values.
const numResults = 3

// The HTTP phases, as label values of MetricHTTPPhase.
const (
	phaseDNS = iota
	phaseConnect
	phaseTLS
	phaseFirstByte
	numPhases
)

var phaseNames = [numPhases]string{"dns", "connect", "tls", "first_byte"}

// typeIndex returns t as an index, and false for a type out of range.
func typeIndex(t probe.Type) (int, bool) { return int(t), int(t) < probe.NumTypes }

// resultIndex returns r as an index; a result out of range is unknown.
func resultIndex(r probe.Result) int {
	if int(r) >= numResults {
		return int(probe.Unknown)
	}
	return int(r)
}

// measureSets are the attribute sets of the per-probe measurements of one
// target (or of all targets, without the target label), built once so that
// recording a probe allocates nothing.
type measureSets struct {
	probe [probe.NumTypes][numResults][]metric.AddOption
	dur   [probe.NumTypes][numResults][]metric.RecordOption
	phase [numPhases][]metric.RecordOption
}

func newMeasureSets(extra ...attribute.KeyValue) *measureSets {
	s := &measureSets{}
	for ti, typ := range kubeletTypes {
		for ri, res := range kubeletResults {
			set := attribute.NewSet(append([]attribute.KeyValue{
				attribute.String(labelProbeType, typ), attribute.String(labelResult, res),
			}, extra...)...)
			s.probe[ti][ri] = []metric.AddOption{metric.WithAttributeSet(set)}
			s.dur[ti][ri] = []metric.RecordOption{metric.WithAttributeSet(set)}
		}
	}
	for pi, name := range phaseNames {
		set := attribute.NewSet(append([]attribute.KeyValue{attribute.String(labelPhase, name)}, extra...)...)
		s.phase[pi] = []metric.RecordOption{metric.WithAttributeSet(set)}
	}
	return s
}

// probeMetrics are the synchronous instruments: what the engine and the
// server report through their observers.
type probeMetrics struct {
	probes      metric.Int64Counter
	duration    metric.Float64Histogram
	phase       metric.Float64Histogram
	transitions metric.Int64Counter
	readiness   metric.Float64Histogram
	commit      metric.Float64Histogram
	evictions   metric.Int64Counter
	eventsSent  metric.Int64Counter

	// perTarget adds the target label to the per-probe families; then
	// targets holds a *measureSets per target name, built on its first
	// probe and dropped when it is deleted.
	perTarget bool
	targets   sync.Map
	all       *measureSets // without perTarget

	// transitionSets[type][from][to], without perTarget.
	transitionSets [probe.NumTypes][numResults][numResults][]metric.AddOption
}

func newProbeMetrics(m metric.Meter, perTarget bool) (*probeMetrics, error) {
	pm := &probeMetrics{perTarget: perTarget}
	var err error
	c := func(name, desc string) metric.Int64Counter {
		var ctr metric.Int64Counter
		if err == nil {
			ctr, err = m.Int64Counter(name, metric.WithDescription(desc))
		}
		return ctr
	}
	h := func(name, desc string, bounds []float64) metric.Float64Histogram {
		var hist metric.Float64Histogram
		if err == nil {
			hist, err = m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(bounds...))
		}
		return hist
	}
	pm.probes = c(MetricProbes, "Probe executions, by probe type and raw result (kubelet's metric).")
	pm.duration = h(MetricProbeDuration, "Duration of probe executions, failed ones included (kubelet records successes only).", probeBuckets)
	pm.phase = h(MetricHTTPPhase, "Duration of the phases of HTTP probes (dns, connect, tls, first_byte); a reused connection has no dns, connect or tls.", probeBuckets)
	pm.transitions = c(MetricTransitions, "Published result transitions, by probe type and result before and after.")
	pm.readiness = h(MetricReadinessLatency, "Time from a target's creation or reset to its first readiness (cold start).", readinessBuckets)
	pm.commit = h(MetricCommit, "Duration of store transactions (group commits).", commitBuckets)
	pm.evictions = c(MetricWatchEvictions, "Watchers ended because they fell too far behind.")
	pm.eventsSent = c(MetricWatchEventsSent, "Events sent on Watch streams.")
	if err != nil {
		return nil, err
	}
	// Counters start at 0 so that rates are right from the first event.
	ctx := context.Background()
	pm.evictions.Add(ctx, 0)
	pm.eventsSent.Add(ctx, 0)
	if !perTarget {
		pm.all = newMeasureSets()
		for ti := range kubeletTypes {
			for ri := range kubeletResults {
				pm.probes.Add(ctx, 0, pm.all.probe[ti][ri]...)
			}
		}
		for ti, typ := range kubeletTypes {
			for from := range numResults {
				for to := range numResults {
					set := attribute.NewSet(
						attribute.String(labelProbeType, typ),
						attribute.String(labelFrom, probe.Result(from).String()),
						attribute.String(labelTo, probe.Result(to).String()),
					)
					pm.transitionSets[ti][from][to] = []metric.AddOption{metric.WithAttributeSet(set)}
				}
			}
		}
	}
	return pm, nil
}

// sets returns the attribute sets for target's measurements.
func (pm *probeMetrics) sets(target string) *measureSets {
	if !pm.perTarget {
		return pm.all
	}
	if s, ok := pm.targets.Load(target); ok {
		return s.(*measureSets)
	}
	s, _ := pm.targets.LoadOrStore(target, newMeasureSets(attribute.String(labelTarget, target)))
	return s.(*measureSets)
}

// probeDone records one probe execution. It allocates nothing (after a
// target's first probe, with the target label).
func (pm *probeMetrics) probeDone(ctx context.Context, target string, typ probe.Type, out probe.Outcome) {
	ti, ok := typeIndex(typ)
	if !ok {
		return
	}
	ri := resultIndex(out.Result)
	s := pm.sets(target)
	pm.probes.Add(ctx, 1, s.probe[ti][ri]...)
	pm.duration.Record(ctx, out.Latency.Seconds(), s.dur[ti][ri]...)
	if out.Phases == (probe.Phases{}) {
		return
	}
	for pi, d := range [numPhases]time.Duration{out.Phases.DNS, out.Phases.Connect, out.Phases.TLS, out.Phases.FirstByte} {
		if d > 0 {
			pm.phase.Record(ctx, d.Seconds(), s.phase[pi]...)
		}
	}
}

// published counts transitions and forgets deleted targets.
func (pm *probeMetrics) published(ev *engine.Event) {
	switch ev.Kind {
	case engine.KindTransition:
		ti, ok := typeIndex(ev.Probe)
		if !ok {
			return
		}
		from, to := resultIndex(ev.From), resultIndex(ev.To)
		if !pm.perTarget {
			pm.transitions.Add(context.Background(), 1, pm.transitionSets[ti][from][to]...)
			return
		}
		pm.transitions.Add(context.Background(), 1, metric.WithAttributes(
			attribute.String(labelProbeType, kubeletTypes[ti]),
			attribute.String(labelFrom, probe.Result(from).String()),
			attribute.String(labelTo, probe.Result(to).String()),
			attribute.String(labelTarget, ev.Name),
		))
	case engine.KindDeleted:
		if pm.perTarget {
			pm.targets.Delete(ev.Name)
		}
	default:
	}
}

func (pm *probeMetrics) ready(target string, sinceStart time.Duration) {
	if pm.perTarget {
		pm.readiness.Record(context.Background(), sinceStart.Seconds(), metric.WithAttributes(attribute.String(labelTarget, target)))
		return
	}
	pm.readiness.Record(context.Background(), sinceStart.Seconds())
}

func (pm *probeMetrics) committed(took time.Duration) {
	pm.commit.Record(context.Background(), took.Seconds())
}

func (pm *probeMetrics) watcherEvicted() { pm.evictions.Add(context.Background(), 1) }

func (pm *probeMetrics) eventsSentN(n int) { pm.eventsSent.Add(context.Background(), int64(n)) }
