package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/keyspace"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/store/etcd"
)

// observation is one call of Options.Membership, its events summarised.
type observation struct {
	After, Rev int64
	Events     []string // "PUT key" or "DELETE key"
}

// observations records the calls of Options.Membership.
type observations struct {
	mu    sync.Mutex
	calls []observation
}

func (o *observations) observe(after, rev int64, events []*clientv3.Event) {
	call := observation{After: after, Rev: rev}
	for _, ev := range events {
		call.Events = append(call.Events, fmt.Sprintf("%s %s", ev.Type, ev.Kv.Key))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, call)
}

func (o *observations) get() []observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]observation(nil), o.calls...)
}

// Follow hands Options.Membership the etcd revisions it moves to, in
// order and chained (each call's after is the previous call's revision,
// the first says where the Follow starts), every revision that changed
// watched keys besides P/events with those changes (revisions without
// such changes may be folded into a later call): the cluster's view and
// the engine's follow one watch.
func TestFollowHandsMembershipItsKeys(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	cli := c.Client(t)
	var seen observations
	s := open(t, cli, etcd.Options{ReplicaID: "a", Membership: seen.observe})
	from := load(t, s).Revision
	f := follow(t, s, from)
	start := keyspace.EtcdRevision(from)

	ctx := t.Context()
	joined, err := cli.Put(ctx, "/probed/members/x", "{}")
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, create("web"))
	moved, err := cli.Txn(ctx).Then(
		clientv3.OpPut("/probed/shards/0001", "x"),
		clientv3.OpDelete("/probed/members/x"),
	).Commit()
	if err != nil {
		t.Fatal(err)
	}
	r1, r3 := joined.Header.Revision, moved.Header.Revision
	f.waitFor(keyspace.Position(r3))
	want := []observation{
		{Rev: r1, Events: []string{"PUT /probed/members/x"}},
		{Rev: r3, Events: []string{"PUT /probed/shards/0001", "DELETE /probed/members/x"}},
	}
	poll.UntilMet(t, "the observations", 10*time.Second, func() string {
		calls := seen.get()
		if len(calls) == 0 || calls[0].After != start {
			return fmt.Sprintf("the first call %v does not start at %d", calls, start)
		}
		var changed []observation
		for i, o := range calls {
			if i > 0 && o.After != calls[i-1].Rev {
				return fmt.Sprintf("call %d %+v does not follow call %d %+v", i, o, i-1, calls[i-1])
			}
			if len(o.Events) > 0 {
				changed = append(changed, observation{Rev: o.Rev, Events: o.Events})
			}
		}
		return cmp.Diff(want, changed)
	})
}

// RequestProgress moves Follow to etcd's revision when only keys it does
// not watch changed (another client's, on a shared etcd): the view can be
// asked to reach etcd's revision without waiting for etcd's progress
// interval (10 minutes).
func TestRequestProgressMovesFollow(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	cli := c.Client(t)
	s := open(t, cli, etcd.Options{ReplicaID: "a"})
	f := follow(t, s, load(t, s).Revision)
	put, err := cli.Put(t.Context(), "/foreign/key", "v")
	if err != nil {
		t.Fatal(err)
	}
	want := keyspace.Position(put.Header.Revision)
	poll.UntilMet(t, "Follow to reach the foreign write's revision", 20*time.Second, func() string {
		if f.reached() >= want {
			return ""
		}
		// Until the watch is open, etcd has nothing to answer.
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := s.RequestProgress(ctx); err != nil {
			return err.Error()
		}
		return fmt.Sprintf("at %d, want %d", f.reached(), want)
	})
}
