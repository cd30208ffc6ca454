package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/refused"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestShutdownWithEtcdDown: a replica whose etcd went away, with a
// transition it cannot write, still stops within about --shutdown-grace
// (leaving the cluster and the last flush wait for etcd only that long),
// and its log names what was not written. Before etcd goes, its status
// page names the replica probing each target and the members.
func TestShutdownWithEtcdDown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs probed")
	}
	t.Parallel()
	const grace = 2 * time.Second
	etcd := etcdtest.Start(t)
	addr, uiAddr := refused.Reserve(t).Addr(), refused.Reserve(t).Addr()
	p := &crashProcess{t: t, bin: buildProbed(t), args: []string{
		"--addr", addr, "--store", "etcd", "--etcd-endpoints", etcd.Endpoints()[0],
		"--replica-id", "r1", "--lease-ttl", "10s", "--shutdown-grace", grace.String(),
		"--metrics-addr", "", "--ui-addr", uiAddr, "--log-level", "info",
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
		t.Fatalf("web not ready: %v\n%s", err, p.log())
	}

	wantStatusPageCluster(t, "http://"+uiAddr+"/api/events")

	// etcd goes away; web fails: its transition cannot be written. Once
	// a triggered run has returned (or given up waiting for the write),
	// a failure has been found and is pending.
	etcd.Kill(0)
	b.SetHealthy(false)
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, _ = c.Trigger(tctx, "web", probev1.ProbeType_PROBE_TYPE_READINESS)

	if err := p.proc.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	stopped := time.Now()
	select {
	case <-p.proc.Exited():
		p.proc = nil
	case <-time.After(30 * time.Second):
		t.Fatalf("probed still running 30s after SIGTERM with --shutdown-grace 2s\n%s", p.log())
	}
	// The grace period, and then no more waiting on etcd: 2.5s is room
	// for a loaded machine (a revoke the etcd client retried after its
	// Close took 3s more).
	if took := time.Since(stopped); took > grace+2500*time.Millisecond {
		t.Errorf("probed stopped %v after SIGTERM, want about --shutdown-grace %v", took, grace)
	}
	took := time.Since(stopped)
	logs := p.log()
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

// wantStatusPageCluster reads the status page's event stream until it has
// had the snapshot naming web's replica and the members message naming
// this replica. A shard changing hands shows as no replica ("") for a
// moment (a lease renewed late on a loaded machine): it reads the stream
// again until the page names r1, for 30 s at the most.
func wantStatusPageCluster(t *testing.T, url string) {
	t.Helper()
	poll.Every(100*time.Millisecond).UntilMet(t, "the status page naming r1, alone, as web's replica", 30*time.Second, func() string {
		return statusPageCluster(t, url)
	})
}

// statusPageCluster reads the stream once: "" when it is as
// wantStatusPageCluster wants, else what is not.
func statusPageCluster(t *testing.T, url string) string {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var event string
	snapshot, members := false, false
	for (!snapshot || !members) && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case event == "snapshot" && strings.Contains(line, `"name":"web"`):
			if !strings.Contains(line, `"replica":"r1"`) {
				return fmt.Sprintf("snapshot %s: want web probed by r1", line)
			}
			snapshot = true
		case event == "members" && strings.HasPrefix(line, "data: "):
			if !strings.Contains(line, `"self":"r1"`) || !strings.Contains(line, `{"id":"r1","addr":"`) || !strings.Contains(line, `"shards":4096`) {
				return fmt.Sprintf("members %s: want r1, this replica, alone with every shard", line)
			}
			members = true
		}
	}
	if !snapshot || !members {
		return fmt.Sprintf("status page stream ended (%v) without the snapshot with web's replica (%v) and the members (%v)", sc.Err(), snapshot, members)
	}
	return ""
}
