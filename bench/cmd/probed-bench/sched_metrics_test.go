package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/probed/probed/engine/wheel"
)

// TestSchedMetricsServesTheWheel checks what --metrics wires: the wheel's
// counters and lateness histogram, scraped from a real listener.
func TestSchedMetricsServesTheWheel(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	fired := make(chan struct{}, 1)
	w := wheel.New(clockwork.NewRealClock(), func(fires []wheel.Fire) {
		select {
		case fired <- struct{}{}:
		default:
		}
	}, wheel.WithTick(time.Millisecond))
	if err := w.Spread(1, 0, time.Now(), 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	url, stop, err := startSchedMetrics(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; stop() }()
	<-fired

	var body strings.Builder
	if err := scrapeOnce(ctx, url, &body); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"probed_scheduler_fires_total ", "probed_scheduler_lateness_seconds_count ", `probed_scheduler_skipped_total{reason="overlap"} 0`} {
		if !strings.Contains(body.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, body.String())
		}
	}
}

func TestMetricsOnlyForTheWheel(t *testing.T) {
	var stdout bytes.Buffer
	err := runSchedChild(context.Background(), append([]string{"--model=baseline", "--metrics"}, tiny.args()...), &stdout, io.Discard)
	if !errors.Is(err, errMetricsModel) {
		t.Fatalf("sched-child --model=baseline --metrics = %v, want %v", err, errMetricsModel)
	}
}

func TestMetricsOverhead(t *testing.T) {
	if got := metricsOverhead(modelResult{CPUNsPerFire: 200}, modelResult{CPUNsPerFire: 210}); math.Abs(got-5) > 1e-9 {
		t.Errorf("overhead 200 → 210 ns = %v%%, want 5%%", got)
	}
}

// TestSchedWithMetricsEndToEnd runs sched --metrics as a user would and
// checks the extra line and JSON fields.
func TestSchedWithMetricsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three child processes")
	}
	var stdout, stderr bytes.Buffer
	args := append([]string{"sched", "--json", "--metrics"}, tiny.args()...)
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("run(%q) = %d; stderr:\n%s", args, code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "wheel with metrics: cpu ns per fire") {
		t.Errorf("stdout has no metrics line:\n%s", stdout.String())
	}
	var report schedReport
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &report); err != nil {
		t.Fatalf("last line is not the JSON report: %v\n%s", err, stdout.String())
	}
	if report.WheelMetrics == nil || report.WheelMetrics.FiresDelivered <= 0 || report.MetricsOverheadPct == nil {
		t.Errorf("report = %+v, want the wheel measured with metrics and the overhead", report)
	}
}
