package gate

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

// Metrics are the controller's own health and counters, registered with a
// Prometheus registerer.
type Metrics struct {
	log   *slog.Logger
	queue *queueMetrics // the workqueue's; nil without a registry

	connected     prometheus.Gauge
	targets       prometheus.Gauge
	events        prometheus.Counter
	patches       *prometheus.CounterVec
	patchErrors   prometheus.Counter
	patchesGone   prometheus.Counter
	damped        prometheus.Counter
	refused       prometheus.Counter
	applies       *prometheus.CounterVec
	leader        prometheus.Gauge
	cacheGauge    prometheus.Gauge
	mu            sync.Mutex
	disconnectErr error     // guarded by mu
	since         time.Time // of the current connection state; guarded by mu
	isConnected   bool      // guarded by mu
	leading       bool      // guarded by mu
	cacheSynced   bool      // guarded by mu
}

// NewMetrics returns the controller's metrics, registered with reg when
// it is not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		log: slog.Default(),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{Name: "probed_kube_probed_connected",
			Help: "1 while the watch of probed is connected; 0 while probed cannot be reached (pods keep their last conditions)."}),
		targets: prometheus.NewGauge(prometheus.GaugeOpts{Name: "probed_kube_targets",
			Help: "Targets applied (opted-in pods with an IP and valid probes), over every namespace's set."}),
		events: prometheus.NewCounter(prometheus.CounterOpts{Name: "probed_kube_watch_events_total",
			Help: "Events received from probed's watch."}),
		patches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "probed_kube_condition_patches_total",
			Help: "Patches of the probed.io/ready condition, by the status written."}, []string{"status"}),
		patchErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "probed_kube_condition_patch_errors_total",
			Help: "Condition patches the API server refused or that failed (retried with a backoff)."}),
		patchesGone: prometheus.NewCounter(prometheus.CounterOpts{Name: "probed_kube_condition_patches_gone_total",
			Help: "Condition patches of a pod deleted or replaced by one of the same name (the UID precondition) meanwhile."}),
		damped: prometheus.NewCounter(prometheus.CounterOpts{Name: "probed_kube_condition_writes_damped_total",
			Help: "Condition writes put off because the pod's condition was written less than --condition-min-interval ago."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "probed_kube_pods_refused_total",
			Help: "Pod contents whose probes were refused (by the controller's validation or by probed): each gets a Warning Event and no target."}),
		applies: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "probed_kube_applies_total",
			Help: "Applies of the target set to probed, by result (ok, error)."}, []string{"result"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "probed_kube_leader",
			Help: "1 while this replica holds the leader Lease."}),
		cacheGauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "probed_kube_pod_cache_synced",
			Help: "1 once the pod cache has its first list (every replica, before leading)."}),
	}
	if reg != nil {
		m.queue = newQueueMetrics()
		reg.MustRegister(m.queue.collectors()...)
		reg.MustRegister(m.connected, m.targets, m.events, m.patches, m.patchErrors, m.patchesGone, m.damped, m.refused, m.applies, m.leader, m.cacheGauge)
	}
	return m
}

// Connected reports whether probed's watch is connected, since when, and
// why not.
func (m *Metrics) Connected() (bool, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.isConnected, m.since, m.disconnectErr
}

// Leading reports whether this replica leads.
func (m *Metrics) Leading() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leading
}

// SetCacheSynced records whether the pod cache has its first list.
func (m *Metrics) SetCacheSynced(synced bool) {
	m.mu.Lock()
	m.cacheSynced = synced
	m.mu.Unlock()
	if synced {
		m.cacheGauge.Set(1)
	} else {
		m.cacheGauge.Set(0)
	}
}

// CacheSynced reports whether the pod cache has its first list.
func (m *Metrics) CacheSynced() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cacheSynced
}

// SetLeader records whether this replica leads.
func (m *Metrics) SetLeader(leading bool) {
	m.mu.Lock()
	m.leading = leading
	m.mu.Unlock()
	if leading {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

func (m *Metrics) setConnected(ok bool, err error) {
	m.mu.Lock()
	changed := ok != m.isConnected || m.since.IsZero()
	if changed {
		m.isConnected, m.since = ok, time.Now()
		if ok {
			m.log.Info("probed watch connected")
		} else {
			m.log.Warn("probed unreachable: pods keep their last conditions", "err", err)
		}
	}
	m.disconnectErr = err
	m.mu.Unlock()
	if ok {
		m.connected.Set(1)
	} else {
		m.connected.Set(0)
	}
}

// patched counts a patch: written, failed (err), or gone (the pod was
// deleted or replaced).
func (m *Metrics) patched(status corev1.ConditionStatus, err error, gone bool) {
	switch {
	case err != nil:
		m.patchErrors.Inc()
	case gone:
		m.patchesGone.Inc()
	default:
		m.patches.WithLabelValues(string(status)).Inc()
	}
}

func (m *Metrics) applied(err error) {
	if err != nil {
		m.applies.WithLabelValues("error").Inc()
		return
	}
	m.applies.WithLabelValues("ok").Inc()
}

func (m *Metrics) logf(format string, args ...any) {
	m.log.Warn(fmt.Sprintf(format, args...))
}
