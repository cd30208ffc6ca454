package replica_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/keyspace"
	"github.com/probed/probed/internal/poll"
	storeetcd "github.com/probed/probed/store/etcd"
)

// gated is the etcd store with each delivery of its Follow passed through
// hold, on the follow goroutine, which also hands the cluster its keys
// (Observe): hold is a barrier that keeps the engine's view, and the
// ownership the stream established, at a revision of the test's choice.
type gated struct {
	*storeetcd.Store
	hold func(d engine.Delivery, deliver func())
}

func (g *gated) Follow(ctx context.Context, after uint64, deliver func(engine.Delivery)) error {
	return g.Store.Follow(ctx, after, func(d engine.Delivery) {
		g.hold(d, func() { deliver(d) })
	})
}

// probed is a probe target server: per target (the path), who probed it
// (the User-Agent: the member's ID) in order of arrival, with the
// revision that member's view was at.
type probed struct {
	mu      sync.Mutex
	got     map[string][]probeSeen
	members map[string]*member
}

type probeSeen struct {
	by  string
	rev uint64
}

func (p *probed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := probeSeen{by: r.UserAgent()}
	if m := p.members[seen.by]; m != nil {
		seen.rev = m.eng.Revision()
	}
	p.got[r.URL.Path[1:]] = append(p.got[r.URL.Path[1:]], seen)
}

func (p *probed) add(m *member) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.members[m.id] = m
}

func (p *probed) of(name string) []probeSeen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]probeSeen(nil), p.got[name]...)
}

// startWriter runs an engine over the etcd store that is no member: it
// creates targets and probes none, as a replica that owns no shard.
func startWriter(t *testing.T, etcd *etcdtest.Cluster, prefix string) *engine.Engine {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	store, err := storeetcd.Open(ctx, storeetcd.Options{Client: etcd.Client(t), Prefix: prefix, ReplicaID: "w",
		Shards: 16, Instance: "no member key names it"})
	if err != nil {
		cancel()
		t.Fatalf("storeetcd.Open: %v", err)
	}
	eng, err := engine.Open(ctx, engine.Options{
		Clock: clockwork.NewRealClock(), Store: store, Checkers: check.New(check.Options{UserAgent: "w"}),
	})
	if err != nil {
		cancel()
		t.Fatalf("engine.Open: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("writer: %v", err)
		}
		if err := store.Close(); err != nil {
			t.Errorf("writer's store: %v", err)
		}
	})
	return eng
}

// firstBy is the index of member id's first probe in seen, or -1.
func firstBy(seen []probeSeen, id string) int {
	for i, s := range seen {
		if s.by == id {
			return i
		}
	}
	return -1
}

// Targets created in shards just before a replica claims them (the
// claims answered, the stream not there yet) are taken at the claim's
// revision, and handed over at a later claim's: the new owner probes
// none before its view holds every change up to the claim — before, the
// cluster's view applied a claim's answer at once, and a create the
// stream delivered meanwhile was owned, and probed, from a view short of
// the claim —, probes each once the claim arrived (none is left
// unprobed), and no target is probed by two replicas (the old owner
// stopped before its release).
func TestGainedTargetsStartAtTheClaim(t *testing.T) {
	etcd := etcdtest.Start(t)
	const prefix = "/probed/"
	ctx := t.Context()
	srv := &probed{got: map[string][]probeSeen{}, members: map[string]*member{}}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	_, portText, err := net.SplitHostPort(ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		t.Fatal(err)
	}
	w := startWriter(t, etcd, prefix)

	// a joins an empty cluster, its view reaches its join (Resume), and
	// the targets are created (while a's Resume tells it serves) before
	// it claims every shard. a's follow holds the delivery of the
	// creates until the claims are answered, delivers it, then holds the
	// next — the claims among it — until the test has looked at a's
	// engine.
	var (
		aRef    atomic.Pointer[member]
		holdErr error
		heldAt  = make(chan uint64, 1) // the creates' position, delivered
		checked = make(chan struct{})
		phase   atomic.Int32 // 0: before the creates, 1: creates delivered, 2: released
	)
	hold := func(d engine.Delivery, deliver func()) {
		switch phase.Load() {
		case 0:
			created := false
			for _, c := range d.Changes {
				created = created || c.Event.Kind == engine.KindCreated
			}
			if !created {
				deliver()
				return
			}
			holdErr = poll.Wait("a to claim every shard", 30*time.Second, func() bool {
				a := aRef.Load()
				return a != nil && a.b.Cluster().Stats().Shards == 16
			})
			deliver()
			phase.Store(1)
			heldAt <- d.Pos
		case 1:
			<-checked
			phase.Store(2)
			deliver()
		default:
			deliver()
		}
	}
	var names []string
	for i := range 16 {
		names = append(names, fmt.Sprintf("target-%d", i))
	}
	createErrs := make(chan error, len(names))
	var createOnce sync.Once
	create := func(serving bool) {
		if !serving {
			return
		}
		createOnce.Do(func() {
			// At once: a transaction or two.
			var wg sync.WaitGroup
			for _, name := range names {
				spec := &target.Spec{Name: name, LivenessProbe: &probe.Spec{
					Handler:       probe.Handler{HTTPGet: &probe.HTTPGet{Host: "127.0.0.1", Port: int32(port), Path: "/" + name}},
					PeriodSeconds: 1,
				}}
				wg.Go(func() {
					if _, err := w.Create(ctx, spec); err != nil {
						createErrs <- err
					}
				})
			}
			wg.Wait()
		})
	}
	a := startMemberWith(t, etcd, prefix, "a", hooks{
		wrap:      func(s *storeetcd.Store) engine.Store { return &gated{Store: s, hold: hold} },
		onServing: create,
	})
	aRef.Store(a)
	srv.add(a)

	var createdAt uint64
	select {
	case createdAt = <-heldAt:
	case <-time.After(60 * time.Second):
		close(checked)
		t.Fatal("a's view never received the creates")
	}
	if holdErr != nil {
		close(checked)
		t.Fatal(holdErr)
	}
	select {
	case err := <-createErrs:
		close(checked)
		t.Fatalf("Create: %v", err)
	default:
	}
	// a's view is at the creates, short of its claims: a probes none of
	// their targets yet, whatever its cluster's view says.
	claims := claimRevisions(t, etcd.Client(t), prefix)
	known := a.eng.Names(nil) // the creates of the delivered transaction
	if len(known) == 0 {
		close(checked)
		t.Fatal("no target in a's view after the creates' delivery")
	}
	for _, name := range known {
		claim := claims[a.b.Cluster().ShardOf(name)]
		if keyspace.Position(claim) <= createdAt {
			close(checked)
			t.Fatalf("%s: its shard claimed at %d, before its create at %d: the test's premise does not hold", name, claim, keyspace.EtcdRevision(createdAt))
		}
		if got, err := a.owns(ctx, name); err != nil || got {
			t.Errorf("%s: owned by a (%v, err %v) with a's view at %d, short of its shard's claim at %d", name, got, err, keyspace.EtcdRevision(createdAt), claim)
		}
	}
	close(checked)
	agreed(t, names, a)

	// b joins and settles; a releases about half of the shards to it.
	b := startMember(t, etcd, prefix, "b")
	srv.add(b)
	agreed(t, names, a, b)
	claims = claimRevisions(t, etcd.Client(t), prefix)
	poll.UntilMet(t, "each target probed by its owner", 30*time.Second, func() string {
		for _, name := range names {
			owner, _ := a.b.Cluster().Owner(name)
			if i := firstBy(srv.of(name), owner.ID); i < 0 {
				return name + ": not probed by " + owner.ID
			}
		}
		return ""
	})
	for _, name := range names {
		owner, _ := a.b.Cluster().Owner(name)
		seen := srv.of(name)
		first := firstBy(seen, owner.ID)
		if claim := claims[a.b.Cluster().ShardOf(name)]; seen[first].rev < keyspace.Position(claim) {
			t.Errorf("%s: %s's first probe with its view at %d, short of its shard's claim at %d", name, owner.ID, keyspace.EtcdRevision(seen[first].rev), claim)
		}
		for _, s := range seen[first:] {
			if s.by != owner.ID {
				t.Errorf("%s: probed by %s after its owner %s's first probe: two probers", name, s.by, owner.ID)
				break
			}
		}
	}
}

// claimRevisions are the etcd revisions at which each shard's owner key
// was created (its claim).
func claimRevisions(t *testing.T, cli *clientv3.Client, prefix string) map[int]int64 {
	t.Helper()
	resp, err := cli.Get(t.Context(), prefix+"shards/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int]int64, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		s, err := strconv.Atoi(string(kv.Key[len(prefix+"shards/"):]))
		if err != nil {
			t.Fatalf("shard key %q", kv.Key)
		}
		out[s] = kv.CreateRevision
	}
	return out
}
