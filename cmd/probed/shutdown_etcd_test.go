package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/refused"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestShutdownWithEtcdDown: a replica whose etcd went away, with a
// transition it cannot write, still stops within about --shutdown-grace
// (leaving the cluster and the last flush wait for etcd only that long),
// and its log names what was not written.
func TestShutdownWithEtcdDown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs probed")
	}
	t.Parallel()
	const grace = 2 * time.Second
	etcd := etcdtest.Start(t)
	addr := refused.Reserve(t).Addr()
	p := &crashProcess{t: t, bin: buildProbed(t), args: []string{
		"--addr", addr, "--store", "etcd", "--etcd-endpoints", etcd.Endpoints()[0],
		"--replica-id", "r1", "--lease-ttl", "10s", "--shutdown-grace", grace.String(),
		"--metrics-addr", "", "--log-level", "info",
	}}
	if _, err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill() })

	ctx := t.Context()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := probedtest.NewBackend(t, true)
	tg := b.Readiness("web")
	tg.ReadinessProbe.FailureThreshold = 1
	if _, err := c.Create(ctx, tg); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.WaitReady(wctx, "web"); err != nil {
		t.Fatalf("web not ready: %v\n%s", err, p.stderr.String())
	}

	// etcd goes away; web fails: its transition cannot be written. Once
	// a triggered run has returned (or given up waiting for the write),
	// a failure has been found and is pending.
	etcd.Kill(0)
	b.SetHealthy(false)
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, _ = c.Trigger(tctx, "web", probev1.ProbeType_PROBE_TYPE_READINESS)

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	stopped := time.Now()
	select {
	case <-p.exited:
		p.cmd = nil
	case <-time.After(30 * time.Second):
		t.Fatalf("probed still running 30s after SIGTERM with --shutdown-grace 2s\n%s", p.stderr.String())
	}
	// The grace period, and then no more waiting on etcd: 2.5s is room
	// for a loaded machine (a revoke the etcd client retried after its
	// Close took 3s more).
	if took := time.Since(stopped); took > grace+2500*time.Millisecond {
		t.Errorf("probed stopped %v after SIGTERM, want about --shutdown-grace %v", took, grace)
	}
	took := time.Since(stopped)
	logs := p.stderr.String()
	var line string
	for l := range strings.Lines(logs) {
		if strings.Contains(l, "changes not written to the store") {
			line = l
		}
	}
	if !strings.Contains(line, "names=web") || !strings.Contains(line, "transition=") {
		t.Errorf("no log line naming web's unwritten transition; stderr:\n%s", logs)
	}
	t.Logf("stopped %v after SIGTERM; %s", took.Round(time.Millisecond), strings.TrimSpace(line))
}
