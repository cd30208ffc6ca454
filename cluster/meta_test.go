package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/cluster"
	"github.com/probed/probed/internal/etcdtest"
)

func TestShardCountIsPinned(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta := func(prefix string) map[string]int {
		t.Helper()
		resp, err := cli.Get(ctx, prefix+"meta")
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("get %smeta: %v, %v", prefix, resp, err)
		}
		var m map[string]int
		if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
			t.Fatalf("%smeta: %v", prefix, err)
		}
		return m
	}
	// run runs a replica until it has joined, or returns Run's error.
	run := func(prefix string, shards int) error {
		t.Helper()
		clock := clockwork.NewFakeClock()
		c := newCluster(t, cluster.Options{
			Client: etcd.Client(t), Prefix: prefix, ReplicaID: "r", AdvertiseAddr: "r:1",
			Shards: shards, Clock: clock, Logger: testLogger(t, &logged{}),
		})
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		done := make(chan error, 1)
		go func() { done <- c.Run(rctx) }()
		// The clock moves while the replica joins: an etcd request that
		// fails on a loaded machine is retried after a back-off on this
		// clock (a stress run failed here, the refusal never came: the
		// retry waited for a clock nobody moved).
		for c.Stats().Lease == 0 {
			select {
			case err := <-done:
				return err
			case <-time.After(10 * time.Millisecond):
				clock.Advance(time.Second)
			}
		}
		stop()
		// Nothing feeds this Cluster its claims (no store follows
		// etcd): its leave waits a lease TTL for them, by its clock.
		for {
			select {
			case err := <-done:
				return err
			case <-time.After(10 * time.Millisecond):
				clock.Advance(time.Minute)
			}
		}
	}

	if err := run("/a/", 64); err != nil {
		t.Fatalf("first replica: %v", err)
	}
	if got := meta("/a/"); got["shards"] != 64 {
		t.Errorf("meta after the first replica: %v, want 64 shards", got)
	}
	if err := run("/a/", 64); err != nil {
		t.Fatalf("a replica with the same count: %v", err)
	}
	err := run("/a/", 128)
	if !errors.Is(err, cluster.ErrShardCount) {
		t.Fatalf("a replica with another count: %v, want ErrShardCount", err)
	}
	t.Logf("refused: %v", err)

	// The store wrote P/meta first: the count is added, its fields kept.
	if _, err := cli.Put(ctx, "/b/meta", `{"schema":2}`); err != nil {
		t.Fatal(err)
	}
	if err := run("/b/", 32); err != nil {
		t.Fatalf("replica after the store: %v", err)
	}
	if got := meta("/b/"); got["shards"] != 32 || got["schema"] != 2 {
		t.Errorf("meta: %v, want schema 2 and 32 shards", got)
	}
}
