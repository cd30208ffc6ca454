package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/internal/etcdtest"
)

// TestTinyClusterRun runs the measurements of the cluster benchmark for
// real at their smallest (real probed processes over a real etcd, embedded
// in the test) and checks the shape of the JSON; no figure is asserted.
// Registrations are left out to keep it short: they run the same setups
// and registerSpread as the others.
func TestTinyClusterRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs probed replicas over etcd")
	}
	bin, err := probedBin()
	if err != nil {
		t.Fatalf("building probed: %v", err)
	}
	etcd := etcdtest.Start(t)
	args := []string{"cluster", "--probed-bin=" + bin, "--etcd-endpoints=" + strings.Join(etcd.Endpoints(), ","),
		// TTLs far above a renewal's delay on a loaded machine under
		// the race detector (etcd runs in this process).
		"--lease-ttl=5s", "--lease-ttls=5s", "--kills=1", "--failover-targets=12", "--failover-period=200ms",
		"--flap-targets=6", "--registrations=12", "--workers=3", "--watch-targets=3", "--watch-period=50ms", "--watch-flip-every=300ms",
		"--probe-targets=4", "--warmup=100ms", "--duration=400ms", "--only=transitions,watch,probes,failover", "--json"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("run(%q) = %d; stderr:\n%s", args, code, stderr.String())
	}
	var report map[string]any
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &report); err != nil {
		t.Fatalf("last line is not a JSON object: %v\n%s", err, stdout.String())
	}
	got := keys(t, report)
	for _, k := range []string{"transitions", "watch", "probes", "failover", "load_average", "gomaxprocs"} {
		if !slices.Contains(got, k) {
			t.Errorf("JSON has no %q; keys: %v", k, got)
		}
	}
	var r clusterReport
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Registrations) != 0 || len(r.Transitions) != 3 || len(r.Probes) != 3 || len(r.Failover) != 1 {
		t.Errorf("setups measured: %d registrations, %d transitions, %d probes, %d failover; want 0 (not selected), 3, 3, 1",
			len(r.Registrations), len(r.Transitions), len(r.Probes), len(r.Failover))
	}
	if f := r.Failover; len(f) == 1 && (f[0].Targets == 0 || f[0].NotProbed != 0) {
		t.Errorf("failover: %d targets moved, %d not probed again; want some, all probed", f[0].Targets, f[0].NotProbed)
	}
	var paths []string
	for _, w := range r.Watch {
		paths = append(paths, w.Path)
	}
	if !slices.Equal(paths, []string{pathSingle, pathSameReplica, pathOtherReplica}) {
		t.Errorf("Watch delay paths %q", paths)
	}
	if !strings.Contains(stdout.String(), "failover (ms)") {
		t.Errorf("no table before the JSON:\n%s", stdout.String())
	}
}
