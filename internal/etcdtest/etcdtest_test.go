package etcdtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/probed/probed/internal/etcdtest"
)

func TestStart(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get: %v, %v; want v", resp, err)
	}
}

func TestKillLeader(t *testing.T) {
	c := etcdtest.StartCluster(t, 3, etcdtest.Options{TickMs: 20, ElectionMs: 200})
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	old, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Kill(old)
	leader, err := c.WaitLeader(ctx)
	if err != nil || leader == old {
		t.Fatalf("leader after killing %d: %d, %v", old, leader, err)
	}
	if len(c.Endpoints()) != 2 {
		t.Errorf("endpoints after a kill: %v, want 2", c.Endpoints())
	}
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("Put after the leader died: %v", err)
	}
}
