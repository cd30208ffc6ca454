package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNewE2EReport(t *testing.T) {
	keep := newE2EResult(2*time.Second, 100_000, 100_000, 10*time.Second, 50<<20)
	kubelet := newE2EResult(6*time.Second, 100_000, 100_000, 10*time.Second, 60<<20)
	floor := newE2EResult(time.Second, 50_000, 50_000, 10*time.Second, 20<<20)
	socket := newE2EResult(time.Second, 62_500, 62_500, 10*time.Second, 10<<20)
	r := newE2EReport(1000, 100*time.Millisecond, keep, kubelet, floor, socket)
	if r.CPUUsPerProbe != 20 || r.FloorCPUUsPerProbe != 20 || r.SocketFloorCPUUsPerProbe != 16 || r.ProbesPerSecond != 10_000 || r.RSSBytes != 50<<20 {
		t.Errorf("headline figures %+v: want 20 µs/probe (floor 20, socket floor 16), 10,000 probes/s, 50 MiB", r)
	}
	if r.Ratio.KubeletStyleCPU != 3 || r.Ratio.VsFloorCPU != 1 || r.Ratio.VsSocketFloorCPU != 1.25 {
		t.Errorf("ratios %+v: want kubelet style 3, vs floor 1, vs socket floor 1.25", r.Ratio)
	}
	got := keys(t, r)
	for _, k := range []string{"cpu_us_per_probe", "probes_per_second", "rss_bytes", "floor_cpu_us_per_probe", "socket_floor_cpu_us_per_probe",
		"ratio.kubelet_style_cpu", "ratio.vs_socket_floor_cpu", "keep_alive.cpu_us_per_probe", "kubelet_style.cpu_us_per_probe", "floor.cpu_us_per_probe", "socket_floor.cpu_us_per_probe"} {
		if !slices.Contains(got, k) {
			t.Errorf("report JSON has no %q; keys: %v", k, got)
		}
	}
}

func TestPercentiles(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 down to 1
	}
	tests := []struct {
		name string
		in   []time.Duration
		want latency
	}{
		{"empty", nil, latency{}},
		{"one", ms(7), latency{P50: 7, P90: 7, P99: 7, Max: 7}},
		{"two", ms(9, 1), latency{P50: 1, P90: 9, P99: 9, Max: 9}},
		{"odd, unsorted", ms(5, 1, 3), latency{P50: 3, P90: 5, P99: 5, Max: 5}},
		{"one to a hundred", ms(hundred...), latency{P50: 50, P90: 90, P99: 99, Max: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentiles(tt.in); got != tt.want {
				t.Errorf("percentiles(%v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestNewColdReport(t *testing.T) {
	cfg := coldConfig{runs: 2, startDelay: 300 * time.Millisecond, period: 50 * time.Millisecond, compare: []time.Duration{time.Second}}
	samples := []coldSamples{
		{period: 50 * time.Millisecond, detect: []time.Duration{2 * time.Millisecond, 4 * time.Millisecond}, start: []time.Duration{25 * time.Millisecond, 40 * time.Millisecond}},
		{period: time.Second, detect: []time.Duration{2 * time.Millisecond, 3 * time.Millisecond}, start: []time.Duration{500 * time.Millisecond, 900 * time.Millisecond}},
	}
	r := newColdReport(cfg, samples)
	if r.Ratio.VsOneSecondP50 != 20 || r.Ratio.DetectVsOneSecondP50 != 1 {
		t.Errorf("ratios %+v, want vs_1s_p50 20 (500/25), detect 1 (2/2)", r.Ratio)
	}
	if got := r.DetectMs["50ms"]; got != (latency{P50: 2, P90: 4, P99: 4, Max: 4}) {
		t.Errorf("detect_ms[50ms] = %+v", got)
	}
	got := keys(t, r)
	for _, k := range []string{"detect_ms.50ms.p50", "detect_ms.50ms.p99", "detect_ms.50ms.max", "detect_ms.1s.p99", "cold_start_ms.1s.p50", "ratio.vs_1s_p50", "periods_ms"} {
		if !slices.Contains(got, k) {
			t.Errorf("report JSON has no %q; keys: %v", k, got)
		}
	}
}

// probedBinDir holds the probed that probedBin built; TestMain removes it
// once every test has run.
var probedBinDir string

// probedBin builds probed once for the tests that run it.
var probedBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "probed-bench-test-")
	if err != nil {
		return "", err
	}
	probedBinDir = dir
	return probedBinary(context.Background(), "test", "", dir, io.Discard)
})

// TestTinyRuns runs the benchmarks of a real probed for real, tiny, and checks the shape
// of their JSON (no figure is asserted: this machine's timing is not the
// test's business).
func TestTinyRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs probed")
	}
	bin, err := probedBin()
	if err != nil {
		t.Fatalf("building probed: %v", err)
	}
	svgDir := t.TempDir()
	tests := []struct {
		name     string
		args     []string
		wantKeys []string
	}{
		{
			name: "e2e",
			args: []string{"e2e", "--targets=3", "--targets-per-listener=2", "--period=100ms", "--duration=300ms", "--warmup=200ms", "--json",
				"--probed-bin=" + bin, "--svg=" + filepath.Join(svgDir, "e2e.svg")},
			wantKeys: []string{"cpu_us_per_probe", "probes_per_second", "rss_bytes", "floor_cpu_us_per_probe",
				"ratio.kubelet_style_cpu", "ratio.vs_socket_floor_cpu", "keep_alive.lateness_ms.p99", "kubelet_style.probes", "floor.probes", "socket_floor.probes"},
		},
		{
			name: "scale",
			args: []string{"scale", "--targets=8", "--http=0.25", "--grpc=0.25", "--exec=0.25", "--period=200ms", "--settle=300ms", "--window=300ms", "--json",
				"--probed-bin=" + bin, "--svg=" + filepath.Join(svgDir, "scale.svg"), "--heap-profile=" + filepath.Join(svgDir, "heap.pb.gz")},
			wantKeys: []string{"registrations_per_second", "mix.http_keep_alive", "mix.grpc", "mix.exec", "base_rss_bytes", "base_goroutines",
				"fresh.rss_bytes_per_target", "fresh.goroutines", "fresh.goroutines_above_empty", "fresh.probes_per_second", "list.seconds",
				"list.pages", "restart_seconds", "restarted.goroutines"},
		},
		{
			name: "api",
			args: []string{"api", "--targets=200", "--duration=2s", "--together", "--json", "--probed-bin=" + bin + "," + bin,
				"--cpu-profile=" + filepath.Join(svgDir, "cpu.pb.gz")},
			wantKeys: []string{"concurrency", "duration_ms", "runs"},
		},
		{
			name:     "restart",
			args:     []string{"restart", "--targets=6", "--period=200ms", "--rounds=2", "--json", "--probed-bin=" + bin + "," + bin},
			wantKeys: []string{"targets", "data_bytes", "runs", "load_average"},
		},
		{
			name: "coldstart",
			args: []string{"coldstart", "--runs=1", "--start-delay=20ms", "--period=50ms", "--compare=100ms,1s", "--json",
				"--probed-bin=" + bin, "--svg=" + filepath.Join(svgDir, "coldstart.svg")},
			wantKeys: []string{"detect_ms.50ms.p50", "detect_ms.100ms.p99", "detect_ms.1s.max", "cold_start_ms.1s.p50", "ratio.vs_1s_p50", "runs"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "api" {
				needGHZ(t)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			if code := run(ctx, tt.args, &stdout, &stderr); code != 0 {
				t.Fatalf("run(%q) = %d; stderr:\n%s", tt.args, code, stderr.String())
			}
			var report map[string]any
			if err := json.Unmarshal(lastLine(stdout.Bytes()), &report); err != nil {
				t.Fatalf("last line is not a JSON object: %v\n%s", err, stdout.String())
			}
			got := keys(t, report)
			for _, k := range tt.wantKeys {
				if !slices.Contains(got, k) {
					t.Errorf("JSON has no %q; keys: %v", k, got)
				}
			}
			if !strings.Contains(stdout.String(), tt.name+":") {
				t.Errorf("no table before the JSON:\n%s", stdout.String())
			}
		})
	}
	for _, f := range []string{"e2e.svg", "coldstart.svg", "scale.svg", "heap-8.pb.gz", "heap-8.pb.gz.metrics"} {
		if b, err := os.ReadFile(filepath.Join(svgDir, f)); err != nil || !bytes.Contains(b, []byte("<svg")) && !bytes.HasPrefix(b, []byte("\x1f\x8b")) && !bytes.Contains(b, []byte("go_memstats_heap_inuse_bytes")) {
			t.Errorf("%s: %v, starts %q", f, err, b[:min(len(b), 20)])
		}
	}
}

func TestMedianWindow(t *testing.T) {
	w := func(cpu float64) e2eResult { return e2eResult{CPUUsPerProbe: cpu} }
	tests := []struct {
		name    string
		in      []e2eResult
		want    float64
		wantAll []float64
	}{
		{"one window", []e2eResult{w(5)}, 5, nil},
		{"odd", []e2eResult{w(9), w(1), w(5)}, 5, []float64{9, 1, 5}},
		{"even: the lower middle", []e2eResult{w(4), w(3), w(1), w(2)}, 2, []float64{4, 3, 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := medianWindow(tt.in)
			if got.CPUUsPerProbe != tt.want || !slices.Equal(got.WindowsCPUUsPerProbe, tt.wantAll) {
				t.Errorf("medianWindow = %v (windows %v), want %v (windows %v)", got.CPUUsPerProbe, got.WindowsCPUUsPerProbe, tt.want, tt.wantAll)
			}
		})
	}
}
