package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

// tiny is a workload small enough for a unit test. No timing figure of it
// is asserted: only the shape of the results.
var tiny = schedConfig{
	probes:   100,
	period:   10 * time.Millisecond,
	duration: 300 * time.Millisecond,
	warmup:   50 * time.Millisecond,
	tick:     time.Millisecond,
}

// keys returns the JSON object keys of v, recursively, as dotted paths.
func keys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			out = append(out, prefix+k)
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
			}
		}
	}
	walk("", m)
	slices.Sort(out)
	return out
}

var modelKeys = []string{
	"cpu_ns_per_fire", "cpu_seconds", "fires_delivered", "fires_expected", "goroutines",
	"lateness_ms", "lateness_ms.max", "lateness_ms.p50", "lateness_ms.p99",
	"rss_bytes", "state_bytes_per_probe", "sys_seconds", "window_seconds",
}

func wantReportKeys() []string {
	want := []string{"baseline", "period_ms", "probes", "ratio", "ratio.cpu_per_fire", "ratio.rss", "wake_floor", "wake_floor_ns_per_fire", "wheel"}
	for _, side := range []string{"baseline", "wake_floor", "wheel"} {
		for _, k := range modelKeys {
			want = append(want, side+"."+k)
		}
	}
	slices.Sort(want)
	return want
}

func TestMeasureModelInProcess(t *testing.T) {
	defer goleak.VerifyNone(t)
	results := map[string]modelResult{}
	for _, name := range allModels() {
		t.Run(name, func(t *testing.T) {
			res, stop, err := measureModel(context.Background(), name, tiny, nil)
			if err != nil {
				t.Fatalf("measureModel() = %v", err)
			}
			stop()
			if diff := cmp.Diff(modelKeys, keys(t, res)); diff != "" {
				t.Errorf("result keys (-want +got):\n%s", diff)
			}
			if res.FiresExpected <= 0 || res.Goroutines <= 0 || res.RSSBytes <= 0 || res.WindowSeconds <= 0 {
				t.Errorf("result = %+v, want positive expected fires, goroutines, RSS and window", res)
			}
			results[name] = res
		})
	}
	report := newSchedReport(tiny, results["wheel"], results["baseline"], results["timers"])
	if diff := cmp.Diff(wantReportKeys(), keys(t, report)); diff != "" {
		t.Errorf("report keys (-want +got):\n%s", diff)
	}
	if report.Probes != 100 || report.PeriodMs != 10 {
		t.Errorf("report probes, period_ms = %d, %v, want 100, 10", report.Probes, report.PeriodMs)
	}
}

func TestNewSchedReportRatios(t *testing.T) {
	wheel := modelResult{CPUNsPerFire: 100, RSSBytes: 10 << 20}
	baseline := modelResult{CPUNsPerFire: 3000, RSSBytes: 300 << 20}
	wheel.FiresDelivered, wheel.WindowSeconds = 1_000_000, 10 // 100,000 fires/s
	floor := modelResult{CPUSeconds: 0.6, WindowSeconds: 12}  // 0.05 CPU s per s
	r := newSchedReport(schedConfig{probes: 5, period: 1500 * time.Microsecond}, wheel, baseline, floor)
	want := schedRatio{CPUPerFire: 30, RSS: 30}
	if r.Ratio != want || r.PeriodMs != 1.5 {
		t.Errorf("ratio = %+v, period_ms = %v, want %+v, 1.5", r.Ratio, r.PeriodMs, want)
	}
	if math.Abs(r.WakeFloorNsPerFire-500) > 1e-9 {
		t.Errorf("wake_floor_ns_per_fire = %v, want 500 (0.05 CPU s per s / 100,000 fires per s)", r.WakeFloorNsPerFire)
	}
	if got := newSchedReport(tiny, modelResult{}, baseline, floor); got.Ratio != (schedRatio{}) || got.WakeFloorNsPerFire != 0 {
		t.Errorf("ratio against an empty wheel result = %+v, floor %v ns per fire, want zeros", got.Ratio, got.WakeFloorNsPerFire)
	}
	if math.IsNaN(modelResult{}.deliveredRatio()) {
		t.Errorf("deliveredRatio of an empty result is NaN")
	}
}

// TestSchedEndToEnd runs the sched command as a user would: each model in
// a child process (the test binary, see TestMain), and the wake-up floor,
// a table, then JSON on the last line.
func TestSchedEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two child processes")
	}
	var stdout, stderr bytes.Buffer
	args := append([]string{"sched", "--json"}, tiny.args()...)
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("run(%q) = %d; stderr:\n%s", args, code, stderr.String())
	}
	if !bytes.Contains(stdout.Bytes(), []byte("cpu ns per fire")) {
		t.Errorf("stdout has no table:\n%s", stdout.String())
	}
	var report schedReport
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &report); err != nil {
		t.Fatalf("last line is not the JSON report: %v\n%s", err, stdout.String())
	}
	var generic map[string]any
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &generic); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantReportKeys(), keys(t, generic)); diff != "" {
		t.Errorf("JSON keys (-want +got):\n%s", diff)
	}
	if report.Probes != tiny.probes || report.Wheel.FiresExpected <= 0 || report.Baseline.FiresExpected <= 0 || report.WakeFloor.FiresDelivered <= 0 {
		t.Errorf("report = %+v, want both sides and the wake-up floor measured", report)
	}
	if !bytes.Contains(stdout.Bytes(), []byte("wake-up floor")) {
		t.Errorf("stdout has no wake-up floor line:\n%s", stdout.String())
	}
}
