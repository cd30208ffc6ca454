package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/probedproc"
	"github.com/probed/probed/internal/refused"
)

// TestClusterSettingsDiffer: a replica started with another --min-period
// than the cluster's first replica refuses to join, naming the
// difference, rather than reporting other effective periods than the
// owner probes at; one with the same settings joins.
func TestClusterSettingsDiffer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs probed")
	}
	t.Parallel()
	etcd := etcdtest.Start(t)
	bin := buildProbed(t)
	replica := func(id string, extra ...string) *crashProcess {
		args := append([]string{"--addr", refused.Reserve(t).Addr(), "--store", "etcd",
			"--etcd-endpoints", etcd.Endpoints()[0], "--replica-id", id, "--lease-ttl", "2s",
			"--metrics-addr", ""}, extra...)
		p := &crashProcess{t: t, bin: bin, args: args}
		t.Cleanup(func() { p.kill() })
		return p
	}
	if _, err := replica("r1", "--min-period", "10ms").start(); err != nil {
		t.Fatal(err)
	}
	if _, err := replica("r2", "--min-period", "10ms").start(); err != nil {
		t.Fatalf("a replica with the cluster's settings: %v", err)
	}
	p := replica("r3")
	p.startAsync()
	switch err := p.wait(); {
	case err == nil:
		t.Fatalf("a replica with --min-period 100ms joined a cluster of 10ms:\n%s", p.log())
	case !errors.Is(err, probedproc.ErrExited) || p.last.Err() == nil:
		t.Fatalf("the replica with another --min-period: %v; want it to exit with an error", err)
	case !strings.Contains(p.log(), `--min-period: the cluster's is "10ms", this replica's "100ms"`):
		t.Errorf("the refusal does not name the difference:\n%s", p.log())
	}
}
