package etcd_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/keyspace"
	"github.com/probed/probed/store/codec"
	"github.com/probed/probed/store/etcd"
	"github.com/probed/probed/store/storetest"
)

// TestBatchLimitsFitEtcd: a batch at BatchLimits' most operations, each
// change taking the most operations and compares (creates, each of a
// client of its own, whose count it updates; fenced spec updates, each
// on a shard of its own; removals, each of a client of its own), is one
// transaction etcd takes with its default --max-txn-ops.
func TestBatchLimitsFitEtcd(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	const n = 125
	// Every target on a shard of its own, all owned by "a".
	names, shards := distinctShards("t", n/3+n/2, keyspace.DefaultShards)
	_, opts := member(t, cli, "", keyspace.DefaultShards, "a", shards...)
	s := open(t, cli, opts)
	if got, _ := s.BatchLimits(); got != n {
		t.Errorf("BatchLimits() changes = %d, want %d (etcd's 128 operations, 3 per transaction)", got, n)
	}
	load(t, s) // the store reads its ownership
	created := make([]*engine.Change, n/3)
	for i := range created {
		created[i] = createWeb(names[i])
		created[i].Target.Status.Client = fmt.Sprintf("client-%02d", i)
		if got := s.ChangeCost(created[i]); got != 3 {
			t.Fatalf("ChangeCost(create) = %d, want 3", got)
		}
	}
	commit(t, s, created...)
	var updates []*engine.Change
	for i, name := range names[n/3:] {
		c := createWeb(name)
		commit(t, s, c)
		spec := storetest.WebSpec(name)
		spec.Labels = map[string]string{"v": "2"}
		updates = append(updates, storetest.Update(c.Target, spec, at(1)))
		if got := s.ChangeCost(updates[i]); got != 2 {
			t.Fatalf("ChangeCost(update) = %d, want 2", got)
		}
	}
	commit(t, s, updates...)
	removals := make([]*engine.Change, len(created))
	for i, c := range created {
		removals[i] = storetest.Delete(c.Name, at(2))
		removals[i].Target, removals[i].Event.Target = c.Target, c.Target // as the engine makes them
	}
	commit(t, s, removals...)
	if st := load(t, s); len(st.Events) != 2*len(created)+2*len(updates) {
		t.Errorf("%d events, want %d", len(st.Events), 2*len(created)+2*len(updates))
	}
}

// TestChangeBytes: what a change weighs is at least what it adds to a
// transaction: its spec and status values and its part of P/events
// (ChangeBytes sizes them without encoding them).
func TestChangeBytes(t *testing.T) {
	t.Parallel()
	s := open(t, etcdtest.Start(t).Client(t), etcd.Options{ReplicaID: "a"})
	_, limit := s.BatchLimits()
	if limit > 1536*1024*2/3 {
		t.Errorf("BatchLimits() bytes = %d, more than 2/3 of etcd's default --max-request-bytes", limit)
	}
	c := createWeb("web")
	tr := transition(c, 1)
	for _, ch := range []*engine.Change{c, tr, storetest.Delete("web", at(3))} {
		min := mustLen(codec.MarshalBatch([]*engine.Change{ch}))
		if ch.Target != nil {
			st := ch.Target.Status
			st.Revision = etcd.MaxBatch - 1 // stored: the change's index in its batch
			min += mustLen(codec.MarshalStatus(&st))
		}
		if ch.SpecChanged {
			min += mustLen(codec.MarshalSpec(ch.Target.Spec))
		}
		if got := s.ChangeBytes(ch); got < min {
			t.Errorf("ChangeBytes(%s) = %d, want at least %d", ch.Event.Kind, got, min)
		}
	}
}

func mustLen(b []byte, err error) int {
	if err != nil {
		panic(err)
	}
	return len(b)
}

// TestOverBatchLimitsRefused: a batch over etcd's --max-txn-ops (the
// committer gives one only when a single submission is over the limits)
// is refused with ErrResourceExhausted, without a round trip.
func TestOverBatchLimitsRefused(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	s := open(t, cli, etcd.Options{ReplicaID: "a"})
	n, _ := s.BatchLimits()
	creates := make([]*engine.Change, n/3+1) // each of a client of its own
	for i := range creates {
		creates[i] = create(fmt.Sprintf("t%02d", i))
		creates[i].Target.Status.Client = fmt.Sprintf("client-%02d", i)
	}
	before := currentRevision(t, cli)
	reasons := refusals(t, s.Commit(t.Context(), creates))
	if len(reasons) != len(creates) || !errors.Is(reasons["t00"], engine.ErrResourceExhausted) {
		t.Errorf("refused %d changes (t00: %v), want all %d with ErrResourceExhausted", len(reasons), reasons["t00"], len(creates))
	}
	if rev := currentRevision(t, cli); rev != before {
		t.Errorf("the refused batch reached etcd (revision %d to %d)", before, rev)
	}
}
