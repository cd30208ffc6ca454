package clustersoak_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/internal/clustersoak"
	"github.com/probed/probed/internal/etcdtest"
)

func TestMain(m *testing.M) {
	etcdtest.RunMemberIfAsked() // an etcd member of a soak: never returns
	os.Exit(m.Run())
}

// TestClusterSoak runs the chaos soak (package doc) and fails naming
// every invariant that did not hold.
//
// The short form (make test-cluster: PROBED_CLUSTER_LONG=1, no -short)
// runs one fault of each kind over 200 targets, lease TTL 2 s: about
// 90 s on two cores. PROBED_SOAK=10m runs rounds of faults for 10
// minutes over 400 targets, lease TTL 4 s (make soak). The seed is
// printed; PROBED_SOAK_SEED=<seed> replays its schedule.
// PROBED_SOAK_TARGETS, PROBED_SOAK_TTL and PROBED_SOAK_SLACK override
// the size, the TTL and the slack added to the time bounds;
// PROBED_SOAK_LOG_LEVEL sets the replicas' --log-level, and
// PROBED_SOAK_DIR keeps their logs and etcd's data in that directory
// (otherwise removed with the test).
func TestClusterSoak(t *testing.T) {
	full := os.Getenv("PROBED_SOAK")
	if testing.Short() || (full == "" && os.Getenv("PROBED_CLUSTER_LONG") == "") {
		t.Skip("a long cluster test: runs with PROBED_CLUSTER_LONG=1 (make test-cluster) or PROBED_SOAK=<duration> (make soak), without -short")
	}
	cfg := clustersoak.Config{Self: os.Args[0], Dir: t.TempDir(), Targets: 200, LeaseTTL: 2 * time.Second,
		LogLevel: os.Getenv("PROBED_SOAK_LOG_LEVEL"), Logf: t.Logf}
	if dir := os.Getenv("PROBED_SOAK_DIR"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg.Dir = dir
	}
	if full != "" {
		d, err := time.ParseDuration(full)
		if err != nil || d <= 0 {
			t.Fatalf("PROBED_SOAK=%q: want a positive duration", full)
		}
		cfg.Duration, cfg.Targets, cfg.LeaseTTL = d, 400, 4*time.Second
	}
	cfg.Seed = uint64(time.Now().UnixNano())
	if v := os.Getenv("PROBED_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("PROBED_SOAK_SEED=%q: %v", v, err)
		}
		cfg.Seed = n
	}
	envInt(t, "PROBED_SOAK_TARGETS", &cfg.Targets)
	envDuration(t, "PROBED_SOAK_TTL", &cfg.LeaseTTL)
	envDuration(t, "PROBED_SOAK_SLACK", &cfg.Slack)
	t.Logf("seed %d (PROBED_SOAK_SEED=%d reproduces the schedule)", cfg.Seed, cfg.Seed)

	bin, err := clustersoak.BuildProbed(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Probed = bin
	rep, err := clustersoak.Run(t.Context(), cfg)
	if err != nil {
		logTails(t, cfg.Dir)
		t.Fatalf("seed %d: %v", cfg.Seed, err)
	}
	var out strings.Builder
	rep.Write(&out)
	t.Log("\n" + out.String())
	for name, vs := range rep.Violations {
		t.Errorf("invariant %q violated %d times (seed %d), first: %s", name, len(vs), cfg.Seed, vs[0])
	}
	if t.Failed() {
		logTails(t, cfg.Dir)
	}
}

// logTails logs the end of each replica's log (the directory is removed
// with the test).
func logTails(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "r*.log"))
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		t.Logf("%s, last lines:\n%s", filepath.Base(path), strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

func envInt(t *testing.T, name string, v *int) {
	t.Helper()
	if s := os.Getenv(name); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", name, s)
		}
		*v = n
	}
}

func envDuration(t *testing.T, name string, v *time.Duration) {
	t.Helper()
	if s := os.Getenv(name); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration", name, s)
		}
		*v = d
	}
}
