package etcd_test

import (
	"errors"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/codec"
	"github.com/probed/probed/store/etcd"
	"github.com/probed/probed/store/storetest"
)

// TestBatchLimitsFitEtcd: a batch at BatchLimits' most changes, each
// taking the most operations and compares (a fenced spec update, each on
// a shard of its own; creates), is one transaction etcd takes with its
// default --max-txn-ops.
func TestBatchLimitsFitEtcd(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	g, err := cli.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	fences := func(name string) (string, clientv3.LeaseID, bool) { return "/probed/shards/" + name, g.ID, true }
	s := open(t, cli, etcd.Options{ReplicaID: "a", Fence: fences})
	n, _ := s.BatchLimits()
	if n != 63 {
		t.Errorf("BatchLimits() changes = %d, want 63 (etcd's 128 operations, 2 per change, 2 per transaction)", n)
	}
	creates := make([]*engine.Change, n)
	for i := range creates {
		creates[i] = createWeb(fmt.Sprintf("t%02d", i))
		if _, err := cli.Put(t.Context(), "/probed/shards/"+creates[i].Name, "a", clientv3.WithLease(g.ID)); err != nil {
			t.Fatal(err)
		}
	}
	commit(t, s, creates...)
	updates := make([]*engine.Change, n)
	for i, c := range creates {
		spec := storetest.WebSpec(c.Name)
		spec.Labels = map[string]string{"v": "2"}
		updates[i] = storetest.Update(c.Target, spec, at(1))
	}
	commit(t, s, updates...)
	if st := load(t, s); len(st.Events) != 2*n {
		t.Errorf("%d events, want %d", len(st.Events), 2*n)
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
	creates := make([]*engine.Change, n+1)
	for i := range creates {
		creates[i] = create(fmt.Sprintf("t%02d", i))
	}
	before := currentRevision(t, cli)
	reasons := refusals(t, s.Commit(t.Context(), creates))
	if len(reasons) != n+1 || !errors.Is(reasons["t00"], engine.ErrResourceExhausted) {
		t.Errorf("refused %d changes (t00: %v), want all %d with ErrResourceExhausted", len(reasons), reasons["t00"], n+1)
	}
	if rev := currentRevision(t, cli); rev != before {
		t.Errorf("the refused batch reached etcd (revision %d to %d)", before, rev)
	}
}
