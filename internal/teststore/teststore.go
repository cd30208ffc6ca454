// Package teststore opens the stores the API tests run over: a bbolt
// file, probed's default, and etcd, its cluster mode's, so that what
// holds for one is shown to hold for the other.
package teststore

import (
	"testing"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/bolt"
	"github.com/probed/probed/store/etcd"
)

// Kind names a store.
type Kind string

// The stores.
const (
	Bolt Kind = "bolt" // a bbolt file in t.TempDir
	Etcd Kind = "etcd" // store/etcd on the binary's shared embedded etcd
)

// Kinds are every store, for a table of tests.
var Kinds = []Kind{Bolt, Etcd}

// Open opens a new, empty store of kind k and closes it when t ends. An
// etcd store keeps its keys under a prefix of t's own in the shared etcd
// (etcdtest.Shared), whose package must call etcdtest.StopShared from its
// TestMain; it writes unfenced, as the only replica.
func Open(t testing.TB, k Kind) engine.Store {
	t.Helper()
	var (
		s   engine.Store
		err error
	)
	switch k {
	case Bolt:
		s, err = bolt.Open(t.TempDir())
	case Etcd:
		c := etcdtest.Shared(t)
		s, err = etcd.Open(t.Context(), etcd.Options{Client: c.Client(t), Prefix: etcdtest.SharedPrefix(t), ReplicaID: "r1"})
	default:
		t.Fatalf("teststore: unknown kind %q", k)
	}
	if err != nil {
		t.Fatalf("teststore: open %s: %v", k, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("teststore: close %s: %v", k, err)
		}
	})
	return s
}
