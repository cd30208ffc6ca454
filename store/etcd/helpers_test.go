package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/keyspace"
	"github.com/probed/probed/store/etcd"
	"github.com/probed/probed/store/storetest"
)

// at is the fixtures' epoch plus sec seconds.
func at(sec int) time.Time { return storetest.Epoch.Add(time.Duration(sec) * time.Second) }

// create is the creation of a bare target named name, as the engine makes
// it over a shared store (Create set).
func create(name string) *engine.Change {
	c := storetest.Create(storetest.BareSpec(name), at(0))
	c.Create = true
	return c
}

// createWeb is create with the fixtures' WebSpec (three probes).
func createWeb(name string) *engine.Change {
	c := storetest.Create(storetest.WebSpec(name), at(0))
	c.Create = true
	return c
}

// transition is a readiness transition of the target after c, to success
// on odd n and failure on even n.
func transition(c *engine.Change, n int) *engine.Change {
	to := probe.Failure
	if n%2 == 1 {
		to = probe.Success
	}
	return storetest.Transition(c.Target, probe.Readiness, to, int32(n), at(n))
}

// commit commits changes and fails the test on error.
func commit(t testing.TB, s *etcd.Store, changes ...*engine.Change) {
	t.Helper()
	if err := s.Commit(t.Context(), changes); err != nil {
		if c, ok := errors.AsType[*engine.ConflictError](err); ok {
			for name, why := range c.Refused {
				t.Fatalf("Commit(%d changes) = %v: %s: %v, and %d more", len(changes), err, name, why, len(c.Refused)-1)
			}
		}
		t.Fatalf("Commit(%d changes) = %v", len(changes), err)
	}
}

// load loads s and fails the test on error.
func load(t testing.TB, s *etcd.Store) *engine.Stored {
	t.Helper()
	st, err := s.Load(t.Context())
	if err != nil {
		t.Fatalf("Load() = %v", err)
	}
	return st
}

// refusals returns the reasons of a *engine.ConflictError, failing the
// test when err is not one.
func refusals(t *testing.T, err error) map[string]error {
	t.Helper()
	var conflict *engine.ConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("error %v, want an *engine.ConflictError", err)
	}
	return conflict.Refused
}

// autoAdvance moves clock on by the longest backoff whenever something
// waits on it, until the test ends: the store's retries happen at once.
// Use it with a negative RequestTimeout, so that only backoffs wait.
func autoAdvance(t *testing.T, clock *clockwork.FakeClock) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for clock.BlockUntilContext(ctx, 1) == nil {
			clock.Advance(2 * time.Second)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// revision returns the etcd revision of cli's cluster now.
func currentRevision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(t.Context(), "/")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// openLossy opens a store of replica "a" over etcd c, through a client
// whose transactions can lose their answer (the returned lossyKV),
// on a fake clock with no request timeout; moving: the clock moves on by
// itself whenever the store waits on it (autoAdvance).
func openLossy(t *testing.T, c *etcdtest.Cluster, moving bool) (*etcd.Store, *lossyKV, *clockwork.FakeClock) {
	t.Helper()
	cli := c.Client(t)
	kv := &lossyKV{KV: cli.KV}
	cli.KV = kv
	clock := clockwork.NewFakeClock()
	if moving {
		autoAdvance(t, clock)
	}
	return open(t, cli, etcd.Options{ReplicaID: "a", Clock: clock, RequestTimeout: -1}), kv, clock
}

// lossyKV is a client's KV whose transactions can lose their answer:
// applied (or not) but answered with etcd's "request timed out", as when
// the connection or the leader is lost after the request was sent.
type lossyKV struct {
	clientv3.KV
	mu sync.Mutex
	// plan says, for the next transactions in turn, what happens to
	// them; once it is used up, they go through.
	plan []fate
	// held are the transactions not applied yet (fate heldBack).
	held []*lossyTxn
	// sent counts the transactions committed through the KV.
	sent int
}

type fate int

const (
	applied  fate = iota + 1 // applied, answer lost
	heldBack                 // not applied now, answer lost; applyHeld applies it later
)

// lose sets the fates of the next transactions.
func (kv *lossyKV) lose(fates ...fate) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	kv.plan = fates
}

func (kv *lossyKV) Txn(ctx context.Context) clientv3.Txn {
	return &lossyTxn{kv: kv, ctx: ctx}
}

// lossyTxn records a transaction to commit it as its fate says.
type lossyTxn struct {
	kv               *lossyKV
	ctx              context.Context
	cmps             []clientv3.Cmp
	thenOps, elseOps []clientv3.Op
}

func (t *lossyTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.cmps = append(t.cmps, cs...); return t }
func (t *lossyTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.thenOps = append(t.thenOps, ops...)
	return t
}
func (t *lossyTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.elseOps = append(t.elseOps, ops...)
	return t
}

func (t *lossyTxn) commit(ctx context.Context) (*clientv3.TxnResponse, error) {
	return t.kv.KV.Txn(ctx).If(t.cmps...).Then(t.thenOps...).Else(t.elseOps...).Commit()
}

func (t *lossyTxn) Commit() (*clientv3.TxnResponse, error) {
	t.kv.mu.Lock()
	t.kv.sent++
	var f fate
	if len(t.kv.plan) > 0 {
		f, t.kv.plan = t.kv.plan[0], t.kv.plan[1:]
	}
	if f == heldBack {
		t.kv.held = append(t.kv.held, t)
	}
	t.kv.mu.Unlock()
	switch f {
	case applied:
		if _, err := t.commit(t.ctx); err != nil {
			return nil, fmt.Errorf("lossyKV: %w", err)
		}
		return nil, rpctypes.ErrTimeout
	case heldBack:
		return nil, rpctypes.ErrTimeout
	}
	return t.commit(t.ctx)
}

// applyHeld commits the transactions held back, as a late delivery of a
// request the client gave up on would, and returns etcd's answers.
func (kv *lossyKV) applyHeld(ctx context.Context) ([]*clientv3.TxnResponse, error) {
	kv.mu.Lock()
	held := kv.held
	kv.held = nil
	kv.mu.Unlock()
	var out []*clientv3.TxnResponse
	for _, t := range held {
		resp, err := t.commit(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, resp)
	}
	return out, nil
}

// testLogger logs to the test's output (shown with -v or on failure).
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// member makes replica id a member of a cluster of shards shards under
// prefix that holds owned, as the cluster package's join and claims do:
// its member key, naming a new instance, and the owner keys of owned, on
// a lease of its own. It returns the lease and the options of the
// replica's store (which owns those shards once it has read the keys: a
// Load, or its Follow).
func member(t testing.TB, cli *clientv3.Client, prefix string, shards int, id string, owned ...int) (clientv3.LeaseID, etcd.Options) {
	t.Helper()
	keys := keyspace.New(prefix, shards)
	instance := fmt.Sprintf("%s-%d", id, time.Now().UnixNano())
	g, err := cli.Grant(t.Context(), 600)
	if err != nil {
		t.Fatal(err)
	}
	ops := []clientv3.Op{clientv3.OpPut(keys.Member(id), keyspace.Member{Addr: id + ":1", Instance: instance}.Encode(), clientv3.WithLease(g.ID))}
	for _, s := range owned {
		ops = append(ops, clientv3.OpPut(keys.Shard(s), id, clientv3.WithLease(g.ID)))
	}
	for len(ops) > 0 {
		n := min(len(ops), 100)
		if _, err := cli.Txn(t.Context()).Then(ops[:n]...).Commit(); err != nil {
			t.Fatal(err)
		}
		ops = ops[n:]
	}
	return g.ID, etcd.Options{Prefix: prefix, ReplicaID: id, Shards: shards, Instance: instance}
}

// distinctShards returns n names, made of base and a number, whose shards
// among shards differ.
func distinctShards(base string, n, shards int) (names []string, owned []int) {
	seen := make(map[int]bool)
	for i := 0; len(names) < n; i++ {
		name := fmt.Sprintf("%s%02d", base, i)
		if s := keyspace.ShardOf(name, shards); !seen[s] {
			seen[s] = true
			names, owned = append(names, name), append(owned, s)
		}
	}
	return names, owned
}
