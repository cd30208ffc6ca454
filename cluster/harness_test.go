package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/cluster"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/keyspace"
	"github.com/probed/probed/internal/poll"
	storeetcd "github.com/probed/probed/store/etcd"
)

// env is a cluster of replicas on real etcd servers in the test process.
type env struct {
	t      *testing.T
	etcd   *etcdtest.Cluster
	cli    *clientv3.Client // the test's own client
	prefix string
	shards int
	clock  clockwork.Clock
	// probing is who probes each shard, as each replica's engine would:
	// a shard its store's log shows owned and that it has not released.
	// A replica that starts probing a shard another still probes is a
	// double owner.
	probing probing
	// names has a target name per shard.
	names []string
}

func newEnv(t *testing.T, etcd *etcdtest.Cluster, clock clockwork.Clock, shards int) *env {
	t.Helper()
	e := &env{
		t: t, etcd: etcd, cli: etcd.Client(t), prefix: "/probed/", shards: shards, clock: clock,
		probing: probing{by: map[int]string{}},
	}
	e.names = namesPerShard(t, e.shards)
	return e
}

// namesPerShard finds a target name in each shard.
func namesPerShard(t *testing.T, shards int) []string {
	c := newCluster(t, cluster.Options{Client: &clientv3.Client{}, ReplicaID: "x", AdvertiseAddr: "x", Shards: shards})
	names := make([]string, shards)
	for i, left := 0, shards; left > 0; i++ {
		n := fmt.Sprintf("target-%d", i)
		if s := c.ShardOf(n); names[s] == "" {
			names[s] = n
			left--
		}
	}
	return names
}

func newCluster(t *testing.T, opts cluster.Options) *cluster.Cluster {
	t.Helper()
	if opts.Release == nil {
		opts.Release = func(context.Context, []int) error { return nil }
	}
	c, err := cluster.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// probing records who probes which shard.
type probing struct {
	mu     sync.Mutex
	by     map[int]string
	doubts []string
}

func (p *probing) gain(id string, shards []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range shards {
		if cur, ok := p.by[s]; ok && cur != id {
			p.doubts = append(p.doubts, fmt.Sprintf("%s gained shard %d while %s probes it", id, s, cur))
		}
		p.by[s] = id
	}
}

func (p *probing) lose(id string, shards []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range shards {
		if p.by[s] == id {
			delete(p.by, s)
		}
	}
}

// check fails the test if a shard ever had two probing owners.
func (p *probing) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.doubts) > 0 {
		t.Errorf("%d shards had two owners probing, first: %v", len(p.doubts), p.doubts[:min(5, len(p.doubts))])
	}
}

// replica is a running Cluster.
type replica struct {
	e     *env
	id    string
	c     *cluster.Cluster
	stuck atomic.Bool // Heartbeat fails
	stop  func() error
	// feed stops what feeds the view (startFeed).
	feed func()

	log logged

	mu sync.Mutex
	// owned is what the replica's store's log shows it owning, released
	// what it has released since (cleared when the log shows a shard
	// leaving): it probes owned and not released, as its engine does.
	owned, released []bool
	gains           []gainCall // shards it started probing at a claim
	drops           [][]int    // shards the log took while it probed them
	loses           []loseCall // Release calls
}

// logged are the messages a replica logged.
type logged struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logged) add(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, msg)
}

// has reports whether a message containing s was logged.
func (l *logged) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.msgs, func(m string) bool { return strings.Contains(m, s) })
}

type gainCall struct {
	shards []int
	rev    int64
}

type loseCall struct {
	shards []int
	// held: how many of the shards' keys were on the replica's lease
	// when Release was called; streamed: how many its store's log showed
	// owned.
	held, streamed int
}

// start starts a replica; edit, if not nil, changes its options. The
// replica is stopped when the test ends if it is still running.
func (e *env) start(id string, edit func(*cluster.Options)) *replica {
	e.t.Helper()
	r := &replica{e: e, id: id, owned: make([]bool, e.shards), released: make([]bool, e.shards)}
	opts := cluster.Options{
		Client:        e.etcd.Client(e.t),
		Prefix:        e.prefix,
		ReplicaID:     id,
		AdvertiseAddr: id + ".example:50051",
		LeaseTTL:      time.Minute,
		Settle:        30 * time.Second,
		Shards:        e.shards,
		Clock:         e.clock,
		Logger:        testLogger(e.t, &r.log),
		Heartbeat: func(ctx context.Context) error {
			if r.stuck.Load() {
				return errors.New("scheduler stuck")
			}
			return nil
		},
		Release: r.release,
		Keep:    r.keep,
	}
	if edit != nil {
		edit(&opts)
	}
	r.c = newCluster(e.t, opts)
	ctx, cancel := context.WithCancel(context.Background())
	r.feed = r.startFeed()
	done := make(chan error, 1)
	go func() { done <- r.c.Run(ctx) }()
	var once sync.Once
	var err error
	r.stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
			r.feed()
		})
		return err
	}
	e.t.Cleanup(func() { _ = r.stop() })
	return r
}

// startFeed runs what feeds a replica in probed: the etcd store's Follow,
// following the replica's ownership (its Instance) and handing the member
// and shard keys to its cluster's Observe, from a Load of the store (the
// engine's deliveries are dropped, their ownership recorded: delivered).
// A Follow that fails starts again from another Load, as the engine does
// when it reloads its view. The function returned stops it and waits.
func (r *replica) startFeed() func() {
	t := r.e.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := storeetcd.Open(ctx, storeetcd.Options{Client: r.e.etcd.Client(t), Prefix: r.e.prefix, ReplicaID: r.id,
		Shards: r.e.shards, Instance: r.c.Instance(), Membership: r.c.Observe})
	if err != nil {
		cancel()
		t.Fatalf("storeetcd.Open: %v", err)
	}
	// From before the replica joins, as the engine's view is.
	st, err := s.Load(ctx)
	if err != nil {
		cancel()
		t.Fatalf("Load: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = s.Close() }()
		for ctx.Err() == nil {
			r.own(st.Revision, st.Ownership, false)
			_ = s.Follow(ctx, st.Revision, func(d engine.Delivery) {
				if d.Owned != nil {
					r.own(d.Pos, d.Owned, true)
				}
			})
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond): // etcd's leader lost
			}
			if again, err := s.Load(ctx); err == nil {
				st = again
			}
		}
	}()
	return sync.OnceFunc(func() {
		cancel()
		<-done
	})
}

// own records what the replica's engine does with its store's ownership
// o at position pos: it starts probing the shards that turned its own
// (when claimed, streamed: at the revision of their claim) and stops
// probing those taken from it. It runs on the replica's feed.
func (r *replica) own(pos uint64, o *engine.Ownership, claimed bool) {
	var gained, dropped []int
	r.mu.Lock()
	for s, now := range o.Owned {
		probing := r.owned[s] && !r.released[s]
		if r.owned[s] && !now {
			r.released[s] = false // the log shows it leaving
		}
		r.owned[s] = now
		switch after := now && !r.released[s]; {
		case after && !probing:
			gained = append(gained, s)
		case probing && !after:
			dropped = append(dropped, s)
		}
	}
	r.mu.Unlock()
	rev := keyspace.EtcdRevision(pos)
	if len(dropped) > 0 {
		r.e.probing.lose(r.id, dropped)
		r.mu.Lock()
		r.drops = append(r.drops, dropped)
		r.mu.Unlock()
	}
	if len(gained) == 0 {
		return
	}
	// Gained at the claim's revision: the keys were created there (read
	// at rev: they may be gone by now).
	resp, err := r.e.cli.Get(context.Background(), r.e.prefix+"shards/", clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		r.e.t.Errorf("%s: gain: %v", r.id, err)
		return
	}
	created := map[string]int64{}
	for _, kv := range resp.Kvs {
		created[string(kv.Key)] = kv.CreateRevision
	}
	for _, s := range gained {
		if c := created[fmt.Sprintf("%sshards/%04d", r.e.prefix, s)]; claimed && c != rev {
			r.e.t.Errorf("%s: gained shard %d at revision %d, its claim's is %d", r.id, s, rev, c)
		}
	}
	r.e.probing.gain(r.id, gained)
	r.mu.Lock()
	r.gains = append(r.gains, gainCall{gained, rev})
	r.mu.Unlock()
}

// release is the replica's Options.Release: it stops probing shards.
func (r *replica) release(ctx context.Context, shards []int) error {
	var stopped []int
	call := loseCall{shards: slices.Clone(shards)}
	r.mu.Lock()
	for _, s := range shards {
		// As the engine: only what the log shows owned is released.
		if r.owned[s] {
			call.streamed++
			if !r.released[s] {
				stopped = append(stopped, s)
			}
			r.released[s] = true
		}
	}
	r.mu.Unlock()
	r.e.probing.lose(r.id, stopped)
	lease := r.c.Stats().Lease
	resp, err := r.e.cli.Get(ctx, r.e.prefix+"shards/", clientv3.WithPrefix())
	if err != nil {
		return err
	}
	onLease := map[string]bool{}
	for _, kv := range resp.Kvs {
		onLease[string(kv.Key)] = lease != 0 && clientv3.LeaseID(kv.Lease) == lease
	}
	for _, s := range shards {
		if onLease[fmt.Sprintf("%sshards/%04d", r.e.prefix, s)] {
			call.held++
		}
	}
	r.mu.Lock()
	r.loses = append(r.loses, call)
	r.mu.Unlock()
	return nil
}

// keep is the replica's Options.Keep: it probes shards again.
func (r *replica) keep(shards []int) {
	var kept []int
	r.mu.Lock()
	for _, s := range shards {
		if r.released[s] && r.owned[s] {
			kept = append(kept, s)
		}
		r.released[s] = false
	}
	r.mu.Unlock()
	r.e.probing.gain(r.id, kept)
}

// probes reports whether the replica probes shard s: its log shows it
// owned, and it has not released it.
func (r *replica) probes(s int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owned[s] && !r.released[s]
}

// dropped returns copies of the shards the log took while probed.
func (r *replica) dropped() [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.drops)
}

// calls returns copies of the recorded gains and Release calls.
func (r *replica) calls() ([]gainCall, []loseCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.gains), slices.Clone(r.loses)
}

// owners reads every shard's owner from etcd ("" free).
func (e *env) owners() []string {
	e.t.Helper()
	resp, err := e.cli.Get(context.Background(), e.prefix+"shards/", clientv3.WithPrefix())
	if err != nil {
		e.t.Fatalf("get shards: %v", err)
	}
	owners := make([]string, e.shards)
	for _, kv := range resp.Kvs {
		s, ok := e.shardOfKey(string(kv.Key))
		if !ok || s >= e.shards {
			e.t.Fatalf("shard key %q", kv.Key)
		}
		owners[s] = string(kv.Value)
	}
	return owners
}

// waitOwners waits until etcd's shard owners are want and every replica
// has acted on everything (see barrier).
func (e *env) waitOwners(want []string, rs ...*replica) {
	e.t.Helper()
	waitFor(e.t, "shard owners", func() string {
		if diff := cluster.OwnersDiff(e.owners(), want); diff != "" {
			return diff
		}
		return ""
	})
	e.barrier(rs...)
	if diff := cluster.OwnersDiff(e.owners(), want); diff != "" {
		e.t.Fatalf("owners changed after settling: %s", diff)
	}
}

// barrier waits until every replica has acted on every change of the
// member and shard keys made so far: it rewrites P/meta (in the watched
// range, ignored by the view) and waits for each replica's revision to
// reach that write.
func (e *env) barrier(rs ...*replica) {
	e.t.Helper()
	ctx := context.Background()
	got, err := e.cli.Get(ctx, e.prefix+"meta")
	if err != nil || len(got.Kvs) == 0 {
		e.t.Fatalf("get meta: %v (%d keys)", err, len(got.Kvs))
	}
	put, err := e.cli.Put(ctx, e.prefix+"meta", string(got.Kvs[0].Value))
	if err != nil {
		e.t.Fatalf("put meta: %v", err)
	}
	for _, r := range rs {
		waitFor(e.t, r.id+" to catch up", func() string {
			if got := r.c.Stats().Revision; got < put.Header.Revision {
				return fmt.Sprintf("at revision %d, want %d", got, put.Header.Revision)
			}
			return ""
		})
	}
}

// history replays etcd's history of the shard keys from revision 1 and
// fails the test if a key was ever created while it existed (two owners
// at once) or written other than by a claim. It returns each shard's
// owners in order.
func (e *env) history() [][]string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The watch covers P/meta too: a rewrite of it marks the end.
	got, err := e.cli.Get(ctx, e.prefix+"meta")
	if err != nil || len(got.Kvs) == 0 {
		e.t.Fatalf("get meta: %v", err)
	}
	put, err := e.cli.Put(ctx, e.prefix+"meta", string(got.Kvs[0].Value))
	if err != nil {
		e.t.Fatalf("put meta: %v", err)
	}
	owners := make([][]string, e.shards)
	live := map[string]int64{} // key → lease
	w := e.cli.Watch(ctx, e.prefix+"meta", clientv3.WithRange(clientv3.GetPrefixRangeEnd(e.prefix+"shards/")), clientv3.WithRev(1))
	for rev := int64(0); rev < put.Header.Revision; {
		wr, ok := <-w
		if !ok || wr.Err() != nil {
			e.t.Fatalf("history watch: %v", wr.Err())
		}
		for _, ev := range wr.Events {
			key := string(ev.Kv.Key)
			rev = ev.Kv.ModRevision
			s, isShard := e.shardOfKey(key)
			switch {
			case !isShard:
			case ev.Type == clientv3.EventTypeDelete:
				delete(live, key)
			default:
				if lease, ok := live[key]; ok {
					e.t.Errorf("revision %d: %s written by %s (lease %x) while lease %x holds it", rev, key, ev.Kv.Value, ev.Kv.Lease, lease)
				}
				if ev.Kv.Version != 1 || ev.Kv.Lease == 0 {
					e.t.Errorf("revision %d: %s written with version %d, lease %x: not a claim", rev, key, ev.Kv.Version, ev.Kv.Lease)
				}
				live[key] = ev.Kv.Lease
				owners[s] = append(owners[s], string(ev.Kv.Value))
			}
		}
	}
	return owners
}

// shardOfKey parses a shard key.
func (e *env) shardOfKey(key string) (int, bool) {
	n, ok := strings.CutPrefix(key, e.prefix+"shards/")
	if !ok {
		return 0, false
	}
	s, err := strconv.Atoi(n)
	return s, err == nil
}

// waitFor polls cond (which describes what is missing, or "") for up to
// a minute (real time: etcd and the replicas' goroutines run meanwhile).
func waitFor(t *testing.T, what string, cond func() string) {
	t.Helper()
	poll.UntilMet(t, what, time.Minute, cond)
}

// noClusterGoroutines fails the test if a goroutine of the package
// outlives the replicas' Run.
func noClusterGoroutines(t *testing.T) {
	t.Helper()
	waitFor(t, "the package's goroutines to end", func() string {
		buf := make([]byte, 1<<20)
		stacks := strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n")
		for _, s := range stacks {
			if strings.Contains(s, "probed/cluster.") && !strings.Contains(s, "cluster_test.") {
				return s
			}
		}
		return ""
	})
}

// testLogger logs to t until the test ends, and to log.
func testLogger(t *testing.T, log *logged) *slog.Logger {
	h := &testHandler{t: t, log: log, done: new(atomic.Bool)}
	t.Cleanup(func() { h.done.Store(true) })
	return slog.New(h)
}

type testHandler struct {
	t     *testing.T
	log   *logged
	done  *atomic.Bool // set when the test ends
	attrs []slog.Attr
}

func (h *testHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *testHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", time.Now().Format("05.000"), r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s", a)
		return true
	})
	h.log.add(b.String())
	if !h.done.Load() {
		h.t.Log(b.String())
	}
	return nil
}

func (h *testHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &testHandler{t: h.t, log: h.log, done: h.done, attrs: append(slices.Clone(h.attrs), as...)}
}

func (h *testHandler) WithGroup(string) slog.Handler { return h }
