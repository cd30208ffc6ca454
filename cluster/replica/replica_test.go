package replica_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/check"
	"github.com/probed/probed/cluster"
	"github.com/probed/probed/cluster/replica"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/poll"
	storeetcd "github.com/probed/probed/store/etcd"
)

// member is a replica under test: a Binding driving an engine over the
// etcd store, as cmd/probed wires them.
type member struct {
	id      string
	b       *replica.Binding
	eng     *engine.Engine
	stop    context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	serving []bool // what the Binding told, in order
}

func startMember(t *testing.T, etcd *etcdtest.Cluster, prefix, id string) *member {
	t.Helper()
	return startMemberWith(t, etcd, prefix, id, hooks{})
}

// hooks change how startMemberWith wires a member; the zero value is
// startMember's wiring.
type hooks struct {
	// wrap wraps the engine's store (nil: none).
	wrap func(*storeetcd.Store) engine.Store
	// onServing is also told what serving is told (nil: none; called on
	// the cluster's goroutine, which it holds up).
	onServing func(bool)
	// engine wraps the engine the Binding drives (nil: none).
	engine func(replica.Engine) replica.Engine
	// ttl is the lease's (0: 2s).
	ttl time.Duration
	// membership wraps what the store's follow hands the cluster (nil:
	// none).
	membership func(observe func(after, rev int64, events []*clientv3.Event)) func(after, rev int64, events []*clientv3.Event)
}

// startMemberWith is startMember with hooks, and the engine's HTTP probes
// sent with the member's ID as their User-Agent.
func startMemberWith(t *testing.T, etcd *etcdtest.Cluster, prefix, id string, h hooks) *member {
	t.Helper()
	wrap, onServing := h.wrap, h.onServing
	m := &member{id: id, done: make(chan struct{})}
	cli := etcd.Client(t)
	b, err := replica.Bind(cluster.Options{
		Client: cli, Prefix: prefix, ReplicaID: id, AdvertiseAddr: id + ":1",
		LeaseTTL: cmp.Or(h.ttl, 2*time.Second), Settle: time.Second, Shards: 16,
	}, func(serving bool) {
		m.mu.Lock()
		m.serving = append(m.serving, serving)
		m.mu.Unlock()
		if onServing != nil {
			onServing(serving)
		}
	})
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	m.b = b
	cl := b.Cluster()
	ctx, cancel := context.WithCancel(context.Background())
	observe := cl.Observe
	if h.membership != nil {
		observe = h.membership(observe)
	}
	store, err := storeetcd.Open(ctx, storeetcd.Options{Client: cli, Prefix: prefix, ReplicaID: id,
		Shards: cl.ShardCount(), Instance: cl.Instance(), Leading: cl.Leading, Membership: observe})
	if err != nil {
		cancel()
		t.Fatalf("storeetcd.Open: %v", err)
	}
	var engStore engine.Store = store
	if wrap != nil {
		engStore = wrap(store)
	}
	eng, err := engine.Open(ctx, engine.Options{
		Clock: clockwork.NewRealClock(), Store: engStore, Checkers: check.New(check.Options{UserAgent: id}),
		MayProbe: cl.LeaseValid,
	})
	if err != nil {
		cancel()
		t.Fatalf("engine.Open: %v", err)
	}
	m.eng = eng
	engCtx, stopEngine := context.WithCancel(context.Background())
	engDone := make(chan error, 1)
	go func() { engDone <- eng.Run(engCtx) }()
	var driven replica.Engine = eng
	if h.engine != nil {
		driven = h.engine(eng)
	}
	go func() {
		defer close(m.done)
		if err := b.Run(ctx, driven, store); err != nil {
			t.Errorf("%s: Run: %v", id, err)
		}
	}()
	m.stop = cancel
	t.Cleanup(func() {
		m.leave()
		stopEngine()
		if err := <-engDone; err != nil {
			t.Errorf("%s: engine: %v", id, err)
		}
		if err := store.Close(); err != nil {
			t.Errorf("%s: store: %v", id, err)
		}
	})
	return m
}

// leave stops the membership and waits for it (it hands its shards over).
func (m *member) leave() {
	m.stop()
	<-m.done
}

// owns reports whether the member's engine probes the target (which has
// no probe): Trigger answers ErrNotOwned on a replica that does not, and
// that the target has no such probe on the one that does.
func (m *member) owns(ctx context.Context, name string) (bool, error) {
	_, _, err := m.eng.Trigger(ctx, name, probe.Readiness)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return true, nil
	case errors.Is(err, engine.ErrNotOwned):
		return false, nil
	}
	return false, err
}

// agreed waits until every target is probed by exactly one member, the
// one the cluster names its owner, and each member probes some.
func agreed(t *testing.T, names []string, ms ...*member) {
	t.Helper()
	ctx := t.Context()
	poll.UntilMet(t, "the engines to probe what the cluster assigns", 30*time.Second, func() string {
		count := make(map[*member]int)
		for _, name := range names {
			owner, ok := ms[0].b.Cluster().Owner(name)
			if !ok {
				return name + ": no owner"
			}
			for _, m := range ms {
				got, err := m.owns(ctx, name)
				switch {
				case err != nil:
					return fmt.Sprintf("%s on %s: %v", name, m.id, err)
				case got != (owner.ID == m.id):
					return fmt.Sprintf("%s: probed by %s %t, its owner is %s", name, m.id, got, owner.ID)
				case got:
					count[m]++
				}
			}
		}
		for _, m := range ms {
			if count[m] == 0 {
				return m.id + " probes none"
			}
		}
		return ""
	})
}

// The Binding turns shards gained and lost into targets the engine owns
// and disowns, as replicas join and leave, and the loss of the lease into
// a suspended view and a serving status, until it rejoins.
func TestBindingDrivesTheEngine(t *testing.T) {
	etcd := etcdtest.Start(t)
	const prefix = "/probed/"
	a := startMember(t, etcd, prefix, "a")
	ctx := t.Context()
	var names []string
	for i := range 32 {
		name := fmt.Sprintf("target-%d", i)
		if _, err := a.eng.Create(ctx, &target.Spec{Name: name}); err != nil {
			t.Fatalf("Create: %v", err)
		}
		names = append(names, name)
	}
	agreed(t, names, a)

	b := startMember(t, etcd, prefix, "b")
	agreed(t, names, a, b)

	// a's lease goes (revoked behind its back): it stops vouching for
	// its view, loses every shard to b, rejoins and serves again.
	a.mu.Lock()
	a.serving = nil // each join tells it serves
	a.mu.Unlock()
	lease := a.b.Cluster().Stats().Lease
	if _, err := etcd.Client(t).Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	poll.UntilMet(t, "a to stop serving, then serve again", 30*time.Second, func() string {
		a.mu.Lock()
		defer a.mu.Unlock()
		if n := len(a.serving); n >= 2 && !a.serving[n-2] && a.serving[n-1] {
			return ""
		}
		return fmt.Sprintf("serving told %v", a.serving)
	})
	agreed(t, names, a, b)
	if _, err := a.eng.Get(ctx, names[0]); err != nil {
		t.Errorf("Get after the rejoin: %v", err)
	}

	b.leave()
	agreed(t, names, a)
}

// watchers is the number of watchers of the etcd servers in this process
// (etcd's etcd_debugging_mvcc_watcher_total).
func watchers(t *testing.T) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "etcd_debugging_mvcc_watcher_total" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("etcd_debugging_mvcc_watcher_total not registered")
	return 0
}

// ownsEveryShard waits until m, alone, has claimed the 16 shards.
func ownsEveryShard(t *testing.T, m *member) {
	t.Helper()
	poll.UntilMet(t, m.id+" to own every shard", 30*time.Second, func() string {
		if st := m.b.Cluster().Stats(); st.Shards != 16 {
			return fmt.Sprintf("%d shards", st.Shards)
		}
		return ""
	})
}

// A replica watches etcd once: the store's follow feeds the engine's view
// and the cluster's (members and shards). Before, the cluster had a
// watch of its own over the same keys.
func TestOneWatchPerReplica(t *testing.T) {
	etcd := etcdtest.Start(t)
	a := startMember(t, etcd, "/probed/", "a")
	ownsEveryShard(t, a)
	// A watch of Load's (the history) may still be ending.
	poll.UntilMet(t, "one watcher on etcd", 10*time.Second, func() string {
		if n := watchers(t); n != 1 {
			return fmt.Sprintf("%v watchers", n)
		}
		return ""
	})
}

// On an etcd shared with other clients, their writes raise etcd's
// revision without a change the replica's watch delivers. The lease is
// renewed only while the view reaches the revision of the latest
// renewal's answer within a TTL: the Binding asks the watch for a progress
// notification, so that a busy neighbour costs no replica its shards.
func TestForeignWritesAreNoStall(t *testing.T) {
	etcd := etcdtest.Start(t)
	a := startMember(t, etcd, "/probed/", "a")
	ownsEveryShard(t, a)
	before := a.b.Cluster().Stats()
	// A neighbour writes its own keys, once per poll, until a has renewed
	// its lease six times (three TTLs of 2 s).
	cli := etcd.Client(t)
	poll.UntilMet(t, "six renewals while a neighbour writes", time.Minute, func() string {
		if _, err := cli.Put(t.Context(), "/neighbour/key", time.Now().String()); err != nil {
			t.Fatal(err)
		}
		if st := a.b.Cluster().Stats(); st.LeaseLosses != before.LeaseLosses || st.Renewals-before.Renewals < 6 {
			return fmt.Sprintf("%d renewals, %d leases lost", st.Renewals-before.Renewals, st.LeaseLosses-before.LeaseLosses)
		}
		return ""
	})
	st := a.b.Cluster().Stats()
	if st.LeaseLosses != before.LeaseLosses || st.RenewalsSkipped != before.RenewalsSkipped || st.Renewals-before.Renewals < 6 {
		t.Errorf("while a neighbour wrote: %d leases lost, %d renewals skipped, %d renewals; want none lost or skipped, at least 6 renewals",
			st.LeaseLosses-before.LeaseLosses, st.RenewalsSkipped-before.RenewalsSkipped, st.Renewals-before.Renewals)
	}
}
