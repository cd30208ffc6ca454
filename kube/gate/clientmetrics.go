package gate

import (
	"context"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"
)

// queueMetrics is the workqueue's metrics provider, with the names and
// labels Kubernetes' own controllers use (component-base's workqueue
// metrics), registered with the controller's registry.
type queueMetrics struct {
	depth      *prometheus.GaugeVec
	adds       *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	work       *prometheus.HistogramVec
	unfinished *prometheus.GaugeVec
	longest    *prometheus.GaugeVec
	retries    *prometheus.CounterVec
}

var queueBuckets = prometheus.ExponentialBuckets(10e-9, 10, 12) // 10 ns to 1,000 s, as component-base

func newQueueMetrics() *queueMetrics {
	q := &queueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth",
			Help: "Current depth of the workqueue (pods whose condition waits for a check)."}, []string{"name"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total",
			Help: "Adds handled by the workqueue."}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_queue_duration_seconds",
			Help: "How long an item stays in the workqueue before it is handled.", Buckets: queueBuckets}, []string{"name"}),
		work: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_work_duration_seconds",
			Help: "How long handling an item takes.", Buckets: queueBuckets}, []string{"name"}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_unfinished_work_seconds",
			Help: "Seconds of work in progress not yet observed by work_duration (large: stuck workers)."}, []string{"name"}),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_longest_running_processor_seconds",
			Help: "How long the longest running handler has been running."}, []string{"name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_retries_total",
			Help: "Retries handled by the workqueue."}, []string{"name"}),
	}
	// The controller's queue exists only while it leads: its series are
	// there (at 0) from the start.
	for _, v := range []interface {
		WithLabelValues(...string) prometheus.Gauge
	}{q.depth, q.unfinished, q.longest} {
		v.WithLabelValues(queueName)
	}
	q.adds.WithLabelValues(queueName)
	q.retries.WithLabelValues(queueName)
	q.latency.WithLabelValues(queueName)
	q.work.WithLabelValues(queueName)
	return q
}

// queueName is the controller's workqueue's name.
const queueName = "probed-kube"

func (q *queueMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{q.depth, q.adds, q.latency, q.work, q.unfinished, q.longest, q.retries}
}

func (q *queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.depth.WithLabelValues(name)
}

func (q *queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(name)
}

func (q *queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(name)
}

func (q *queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.work.WithLabelValues(name)
}

func (q *queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(name)
}

func (q *queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.longest.WithLabelValues(name)
}

func (q *queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(name)
}

// restMetrics adapts client-go's request metrics to Prometheus, with the
// names and labels of component-base's.
type restMetrics struct {
	latency     *prometheus.HistogramVec
	rateLimiter *prometheus.HistogramVec
	results     *prometheus.CounterVec
}

// restAdapter holds client-go's request metrics for the whole process.
var restAdapter = newRestMetrics()

// client-go keeps its request metrics process-wide and reads them from
// every request: they are handed to it at init, before any goroutine of
// client-go can run (handing them over later races with the requests of
// clients already running).
func init() {
	clientmetrics.Register(clientmetrics.RegisterOpts{
		RequestLatency:     latencyAdapter{restAdapter.latency},
		RateLimiterLatency: latencyAdapter{restAdapter.rateLimiter},
		RequestResult:      resultAdapter{restAdapter.results},
	})
}

func newRestMetrics() *restMetrics {
	buckets := []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60}
	return &restMetrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rest_client_request_duration_seconds",
			Help: "Request latency to the Kubernetes API server, by verb and host.", Buckets: buckets}, []string{"verb", "host"}),
		rateLimiter: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rest_client_rate_limiter_duration_seconds",
			Help: "Time requests waited for the client-side rate limiter (--kube-api-qps, --kube-api-burst), by verb and host.", Buckets: buckets}, []string{"verb", "host"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rest_client_requests_total",
			Help: "Requests to the Kubernetes API server, by status code, method and host."}, []string{"code", "method", "host"}),
	}
}

// RegisterClientMetrics registers client-go's request metrics (latency,
// client-side rate limiter wait, results by code) with reg. client-go
// keeps them process-wide (handed to it when this package is
// initialized): every registry given here shows the same series.
func RegisterClientMetrics(reg prometheus.Registerer) {
	reg.MustRegister(restAdapter.latency, restAdapter.rateLimiter, restAdapter.results)
}

type latencyAdapter struct{ h *prometheus.HistogramVec }

func (l latencyAdapter) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	l.h.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}

type resultAdapter struct{ c *prometheus.CounterVec }

func (r resultAdapter) Increment(_ context.Context, code, method, host string) {
	r.c.WithLabelValues(code, method, host).Inc()
}
