package etcd_test

import (
	"testing"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/etcd"
	"github.com/probed/probed/store/storetest"
)

// TestContract runs the store contract against a real etcd, one per
// case: a compaction is etcd's, for every prefix (opted in: Compact).
func TestContract(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		cli := etcdtest.Start(t).Client(t)
		return func() engine.Store {
			return open(t, cli, etcd.Options{ReplicaID: "r1", Compact: true})
		}
	})
}

// open opens a store over cli with o (a fake clock unless o has one).
func open(t testing.TB, cli *clientv3.Client, o etcd.Options) *etcd.Store {
	t.Helper()
	o.Client = cli
	if o.Clock == nil {
		o.Clock = clockwork.NewFakeClock()
	}
	s, err := etcd.Open(t.Context(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
