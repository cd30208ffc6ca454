package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/cluster"
)

func TestNewRejectsBadOptions(t *testing.T) {
	cli := &clientv3.Client{}
	noop := func(context.Context, []int) error { return nil }
	valid := func() cluster.Options {
		return cluster.Options{Client: cli, ReplicaID: "r1", AdvertiseAddr: "127.0.0.1:1", Release: noop}
	}
	tests := []struct {
		name  string
		edit  func(*cluster.Options)
		field string // named in the error; "" when valid
	}{
		{"valid", func(*cluster.Options) {}, ""},
		{"no client", func(o *cluster.Options) { o.Client = nil }, "Client"},
		{"no replica ID", func(o *cluster.Options) { o.ReplicaID = "" }, "ReplicaID"},
		{"replica ID with a slash", func(o *cluster.Options) { o.ReplicaID = "a/b" }, "ReplicaID"},
		{"replica ID with a newline", func(o *cluster.Options) { o.ReplicaID = "a\nb" }, "ReplicaID"},
		{"replica ID too long", func(o *cluster.Options) { o.ReplicaID = strings.Repeat("x", 129) }, "ReplicaID"},
		{"no advertise address", func(o *cluster.Options) { o.AdvertiseAddr = "" }, "AdvertiseAddr"},
		{"lease TTL below etcd's minimum", func(o *cluster.Options) { o.LeaseTTL = time.Second }, "LeaseTTL"},
		{"lease TTL not in seconds", func(o *cluster.Options) { o.LeaseTTL = 2500 * time.Millisecond }, "LeaseTTL"},
		{"negative shards", func(o *cluster.Options) { o.Shards = -1 }, "Shards"},
		{"too many shards", func(o *cluster.Options) { o.Shards = cluster.MaxShards + 1 }, "Shards"},
		{"negative settle", func(o *cluster.Options) { o.Settle = -time.Second }, "Settle"},
		{"no Release", func(o *cluster.Options) { o.Release = nil }, "Release"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := valid()
			tt.edit(&opts)
			_, err := cluster.New(opts)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, cluster.ErrInvalid) || !strings.Contains(err.Error(), tt.field+":") {
				t.Fatalf("New: got %v, want ErrInvalid naming %s", err, tt.field)
			}
		})
	}
}

func TestNewReportsEveryBadField(t *testing.T) {
	_, err := cluster.New(cluster.Options{})
	for _, field := range []string{"Client", "ReplicaID", "AdvertiseAddr", "Release"} {
		if !strings.Contains(err.Error(), field+":") {
			t.Errorf("New(Options{}): %v: does not name %s", err, field)
		}
	}
}

func TestShardOfIsFNV1aModuloShards(t *testing.T) {
	c, err := cluster.New(cluster.Options{
		Client: &clientv3.Client{}, ReplicaID: "r", AdvertiseAddr: "a", Shards: 4096,
		Release: func(context.Context, []int) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		want int
	}{
		// fnv-1a 32: "" = 0x811c9dc5, "a" = 0xe40c292c, "foobar" = 0xbf9cf968.
		{"", 0x811c9dc5 % 4096},
		{"a", 0xe40c292c % 4096},
		{"foobar", 0xbf9cf968 % 4096},
	}
	for _, tt := range tests {
		if got := c.ShardOf(tt.name); got != tt.want {
			t.Errorf("ShardOf(%q) = %d, want %d", tt.name, got, tt.want)
		}
	}
}
