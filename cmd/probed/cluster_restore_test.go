package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/refused"
)

// TestClusterEtcdRestored: etcd is restored from a backup (its data
// directory as it was before a target was created): the replica notices
// that etcd's history is not the one it followed, reloads its view from
// etcd in place and says so in its log: the targets the restore removed
// are no longer listed, and a target created after the restore is
// acknowledged and stays (it does not vanish from a frozen view). With a
// short lease the replica's lease is gone from the backup (it rejoined
// while etcd restarted) and the rejoin finds etcd behind its view; with
// a long one the backup has its lease, renewals go on, and their answers'
// revision says that etcd went back.
func TestClusterEtcdRestored(t *testing.T) {
	clusterLong(t)
	t.Parallel()
	bin := buildProbed(t)
	for _, tc := range []struct {
		name, ttl, log string
	}{
		{"LeaseLost", "2s", "restored from a backup?"},
		{"LeaseKept", "30s", "etcd's history is not the one this replica followed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testEtcdRestored(t, bin, tc.ttl, tc.log)
		})
	}
}

func testEtcdRestored(t *testing.T, bin, ttl, wantLog string) {
	etcd := etcdtest.Start(t)
	p := &crashProcess{t: t, bin: bin, args: []string{"--addr", refused.Reserve(t).Addr(), "--store", "etcd",
		"--etcd-endpoints", etcd.Endpoints()[0], "--replica-id", "r1", "--lease-ttl", ttl, "--settle", "1s",
		"--metrics-addr", "", "--registrations-per-second=0", "--shutdown-grace", "2s"}}
	t.Cleanup(func() { p.kill() })
	if _, err := p.start(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	c, err := client.Dial(ctx, p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	backend := probedtest.NewBackend(t, true)
	// create retries while etcd restarts (Unavailable) and stops at
	// AlreadyExists (an attempt whose answer was lost went through).
	create := func(name string) {
		t.Helper()
		poll.Every(100*time.Millisecond).UntilMet(t, "create "+name, 30*time.Second, func() string {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.Create(cctx, backend.Readiness(name))
			cancel()
			if err == nil || errors.Is(err, client.ErrAlreadyExists) {
				return ""
			}
			return err.Error() + "\n" + p.log()
		})
	}
	// names lists the targets, retrying while the replica is not serving.
	names := func() (string, error) {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ts, err := c.ListAll(lctx, nil)
		var out []string
		for _, tg := range ts {
			out = append(out, tg.GetName())
		}
		return strings.Join(out, ","), err
	}
	waitNames := func(want string) {
		t.Helper()
		poll.UntilMet(t, "targets "+want, 30*time.Second, func() string {
			got, err := names()
			if err == nil && got == want {
				return ""
			}
			return fmt.Sprintf("targets %q (%v), want %q\n%s", got, err, want, p.log())
		})
	}

	create("before")
	waitNames("before")
	// The backup holds the shard claims (and, with a long lease, the
	// replica's lease).
	cli := etcd.Client(t)
	poll.UntilMet(t, "the replica to own every shard", 30*time.Second, func() string {
		resp, err := cli.Get(ctx, "/probed/shards/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && resp.Count == clusterShards {
			return ""
		}
		return fmt.Sprintf("the replica does not own every shard after 30s: %v, %v", resp, err)
	})
	etcd.Stop(0)
	backup := etcd.Backup(t, 0)
	etcd.Restart(t, 0)
	// What the restore loses: targets, and revisions enough that the
	// restored etcd's writes do not catch up at once.
	lost := []string{"before"}
	for i := range 50 {
		name := fmt.Sprintf("lost-%02d", i)
		create(name)
		lost = append(lost, name)
	}
	waitNames(strings.Join(lost, ","))

	etcd.Stop(0)
	etcd.Restore(t, 0, backup)
	etcd.Restart(t, 0)
	create("after")
	waitNames("after,before")
	poll.UntilMet(t, "the replica's log saying that etcd went back", 30*time.Second, func() string {
		if log := p.log(); !strings.Contains(log, "restored from a backup?") || !strings.Contains(log, wantLog) {
			return fmt.Sprintf("no %q in its log:\n%s", wantLog, log)
		}
		return ""
	})
	// It stays: the view reloaded from the restored etcd neither loses
	// "after" nor lists a lost target again. For 2 s: twice the settle,
	// a lease TTL of the short case, several of the view's reloads had
	// it not settled on the restored history.
	poll.Every(100*time.Millisecond).Holds(t, "the targets after,before staying", 2*time.Second, func() string {
		if got, err := names(); err == nil && got != "after,before" { // (an unanswered list claims nothing)
			return fmt.Sprintf("targets %q\n%s", got, p.log())
		}
		return ""
	})
}
