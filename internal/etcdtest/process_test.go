package etcdtest_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/refused"
)

func TestMain(m *testing.M) {
	etcdtest.RunMemberIfAsked() // a member of TestProcesses' cluster: never returns
	os.Exit(m.Run())
}

// TestProcesses starts a three-member cluster of processes of this test
// binary, pauses its leader past an election (SIGSTOP), kills a member
// and restarts it from its data directory: writes go on throughout, and
// the restarted member has them.
func TestProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three etcd processes")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := etcdtest.StartProcesses(ctx, etcdtest.ProcessOptions{
		Self: os.Args[0], Dir: t.TempDir(), Members: 3,
		Addr: func() (string, error) { return refused.Reserve(t).Addr(), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	cli := etcdtest.ClientOf(t, c.Endpoints()...)
	// A put may fail while the cluster elects (a request that reached
	// the paused leader times out): put retries, as a client does.
	put := func(v string) {
		t.Helper()
		poll.Every(100*time.Millisecond).UntilMet(t, "Put "+v, time.Minute, func() string {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if _, err := cli.Put(pctx, "k", v); err != nil {
				return err.Error()
			}
			return ""
		})
	}
	put("1")

	leader, err := c.Leader(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Signal(leader, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	put("2") // the others elect a leader (1 s election timeout)
	if err := c.Signal(leader, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	c.Kill(leader)
	put("3")
	if err := c.Start(leader); err != nil {
		t.Fatal(err)
	}
	one := etcdtest.ClientOf(t, c.Endpoints()[leader])
	resp, err := one.Get(ctx, "k") // linearizable: the member has caught up
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "3" {
		t.Fatalf("Get from the restarted member: %v, %v; want 3", resp, err)
	}
}
