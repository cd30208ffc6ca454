package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/server"
	"github.com/probed/probed/telemetry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newTelemetry builds a Telemetry shut down when the test ends (after
// anything started later, such as a probed).
func newTelemetry(t *testing.T, cfg telemetry.Config) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return tel
}

// startProbed runs a real probed (engine, checkers, gRPC server) wired to
// tel as cmd/probed wires it.
func startProbed(t *testing.T, tel *telemetry.Telemetry) *probedtest.Server {
	t.Helper()
	s := probedtest.Start(t, probedtest.Options{
		Engine: engine.Options{Observer: tel.Observer()},
		Checks: check.Options{Inject: tel.Inject()},
		Server: server.Options{Observer: tel.ServerObserver()},
		GRPC:   tel.GRPCServerOptions(),
	})
	if err := tel.Observe(s.Engine.Stats); err != nil {
		t.Fatalf("Observe: %v", err)
	}
	return s
}

// httpProbe GETs the backend's path every 100 ms, with thresholds of 1.
func httpProbe(b *probedtest.Backend, path string) *probev1.Probe {
	p := b.Probe(path)
	p.FailureThreshold = 1
	return p
}

// tcpProbe connects to the backend every 100 ms.
func tcpProbe(b *probedtest.Backend) *probev1.Probe {
	p := b.Probe("")
	p.Handler = &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "127.0.0.1", Port: b.Port()}}
	return p
}

// waitFor polls GetTarget until cond holds, failing after 10 s.
func waitFor(t *testing.T, c probev1.ProbeServiceClient, name string, cond func(*probev1.Target) bool) {
	t.Helper()
	poll.UntilMet(t, "target "+name+" in the expected state", 10*time.Second, func() string {
		resp, err := c.GetTarget(t.Context(), &probev1.GetTargetRequest{Name: name})
		if err != nil {
			t.Fatalf("GetTarget(%s): %v", name, err)
		}
		if last := resp.GetTarget(); !cond(last) {
			return fmt.Sprintf("target %s never reached the expected state; last status %v", name, last.GetStatus())
		}
		return ""
	})
}

// scrape GETs url and parses the Prometheus text it answers.
func scrape(t *testing.T, url string) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s\n%s", resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse scrape: %v\n%s", err, body)
	}
	return fams, string(body)
}

// find returns the series of fam with (at least) the labels given as
// name, value pairs, or nil.
func find(fam *dto.MetricFamily, labels ...string) *dto.Metric {
	if fam == nil {
		return nil
	}
next:
	for _, m := range fam.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			if label(m, labels[i]) != labels[i+1] {
				continue next
			}
		}
		return m
	}
	return nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// value is a series' value: a counter's or gauge's, a histogram's count.
func value(m *dto.Metric) float64 {
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	default:
		return -1
	}
}
