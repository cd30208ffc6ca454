package main

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestClusterConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string // "" for valid
	}{
		{"defaults", nil, ""},
		{"lease TTL below etcd's minimum", []string{"--lease-ttls=1s"}, "at least 2s"},
		{"lease TTL not whole seconds", []string{"--lease-ttls=2s,2500ms"}, "whole seconds"},
		{"period not whole milliseconds", []string{"--flap-period=1500us"}, "whole number of milliseconds"},
		{"no kills", []string{"--kills=0"}, "must be positive"},
		{"flips faster than the probes", []string{"--watch-period=100ms", "--watch-flip-every=150ms"}, "twice --watch-period"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var cfg clusterConfig
			cfg.register(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := cfg.validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("validate() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestClusterOnlyFlag(t *testing.T) {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cfg clusterConfig
	cfg.register(fs)
	if err := fs.Parse([]string{"--only=nope"}); err == nil {
		t.Error("--only=nope accepted")
	}
	if err := fs.Parse([]string{"--only=watch,failover"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range clusterScenarios {
		if want := name == "watch" || name == "failover"; cfg.runs(name) != want {
			t.Errorf("runs(%q) = %v, want %v", name, !want, want)
		}
	}
}

func TestCores(t *testing.T) {
	at := time.Unix(100, 0)
	a := cpuSample{at: at, procs: []time.Duration{time.Second, 0}, etcd: time.Second, bench: 0}
	b := cpuSample{at: at.Add(2 * time.Second), procs: []time.Duration{2 * time.Second, 3 * time.Second}, etcd: 2 * time.Second, bench: time.Second}
	procs, etcd, bench := cores(a, b)
	if len(procs) != 2 || procs[0] != 0.5 || procs[1] != 1.5 || etcd != 0.5 || bench != 0.5 {
		t.Errorf("cores = %v, %v, %v; want [0.5 1.5], 0.5, 0.5", procs, etcd, bench)
	}
}

func TestPrintClusterReport(t *testing.T) {
	r := clusterReport{
		Started: "2026-11-24T03:00:00Z", Finished: "2026-11-24T03:10:00Z", CPUs: 2, GOMAXPROCS: 2, LoadAverage: [2]float64{4.2, 6.1},
		Registrations: []registrationResult{{Setup: setupBolt, Targets: 2000, Seconds: 2.5, PerSecond: 800}},
		Transitions: []transitionResult{{Setup: setupThreeEtcd, Targets: 1000, PeriodMs: 100, OfferedPerSecond: 10000,
			TransitionsPerSecond: 4321, ProbesPerSecond: 4400, ProcessCores: []float64{0.25, 0.5, 0.125}, EtcdCores: 0.4, BenchCores: 0.3,
			Lateness: lateness{Fires: 9000, MeanMs: 0.875, P50Ms: 0.5, P99Ms: 25}, LatenessHalvesP99Ms: [2]float64{10, 50}}},
		Watch: []watchDelayResult{{Setup: setupThreeEtcd, Path: pathOtherReplica, Flips: 150, Missed: 1,
			FlipMs: latency{P50: 55.5, P99: 120}, DetectMs: latency{P50: 3.25, P90: 7.5, P99: 20.126, Max: 31}}},
		Probes: []probeRateResult{{Setup: setupThreeEtcd, Replicas: 3, Targets: 3000, PeriodMs: 200, ExpectedPerSecond: 15000, ProbesPerSecond: 12000,
			Processes: []processRate{{Replica: "r1", ProbesPerSecond: 4000, CPUUsPerProbe: 61.25, Cores: 0.245}, {Replica: "r2", ProbesPerSecond: 4100, CPUUsPerProbe: 70, Cores: 0.287}},
			Lateness:  lateness{Fires: 100, MeanMs: 1.625, P50Ms: 2.5, P99Ms: 100}}},
		Failover: []failoverResult{{LeaseTTLSeconds: 2, PeriodMs: 500, Kills: 3, Targets: 1000, NotProbed: 0, MinMs: 2100, Ms: latency{P50: 2900, P90: 3300, P99: 3600, Max: 3700}}},
	}
	var out bytes.Buffer
	if err := printClusterReport(&out, clusterConfig{workers: 32}, r); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"2 CPUs, GOMAXPROCS 2, load average 4.2 → 6.1",
		"registrations (32 workers", "bbolt, single process", "800",
		"1000 × 100ms", "4321", "0.25 / 0.50 / 0.12", "0.88", "25.0", "10.0 / 50.0",
		"other replica", "3.25", "7.50", "20.13", "31.00",
		"3000 × 200ms", "12000", "4000 / 4100", "61.2 / 70.0", "0.24 / 0.29", "1.62", "100.0",
		"2s", "500ms", "2100", "2900", "3300", "3600", "3700",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	var empty bytes.Buffer
	if err := printClusterReport(&empty, clusterConfig{}, clusterReport{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(empty.String(), "registrations") || strings.Contains(empty.String(), "failover") {
		t.Errorf("tables of measurements that did not run:\n%s", empty.String())
	}
}

func TestJoinFloats(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		prec int
		want string
	}{
		{"none", nil, 1, ""},
		{"one", []float64{1.25}, 1, "1.2"},
		{"three", []float64{1, 2.5, 3}, 0, "1 / 2 / 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := joinFloats(tt.in, tt.prec); got != tt.want {
				t.Errorf("joinFloats(%v, %d) = %q, want %q", tt.in, tt.prec, got, tt.want)
			}
		})
	}
}
