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
	// probing is who probes each shard, by Gain, Drop and Lose: a Gain of
	// a shard another replica still probes is a double owner.
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
	if opts.Gain == nil {
		opts.Gain = func([]int, int64) {}
	}
	if opts.Lose == nil {
		opts.Lose = func(context.Context, []int) error { return nil }
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

	mu    sync.Mutex
	gains []gainCall
	drops [][]int
	loses []loseCall
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
	// when Lose was called; owned and fenced: how many Owns and Fence
	// reported as owned.
	held, owned, fenced int
}

// start starts a replica; edit, if not nil, changes its options. The
// replica is stopped when the test ends if it is still running.
func (e *env) start(id string, edit func(*cluster.Options)) *replica {
	e.t.Helper()
	r := &replica{e: e, id: id}
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
		Gain: r.gain,
		Drop: r.drop,
		Lose: r.lose,
	}
	if edit != nil {
		edit(&opts)
	}
	r.c = newCluster(e.t, opts)
	ctx, cancel := context.WithCancel(context.Background())
	r.feed = startFeed(e.t, opts.Client, e.prefix, id, r.c)
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

// startFeed runs what feeds a replica's view in probed: the etcd store's
// Follow, handing the member and shard keys to c.Observe (the engine's
// deliveries are dropped), from etcd's current revision. A Follow that
// fails starts again from etcd's revision then, as the engine does when
// it reloads its view. The function returned stops it and waits.
func startFeed(t *testing.T, cli *clientv3.Client, prefix, id string, c *cluster.Cluster) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := storeetcd.Open(ctx, storeetcd.Options{Client: cli, Prefix: prefix, ReplicaID: id, Membership: c.Observe})
	if err != nil {
		cancel()
		t.Fatalf("storeetcd.Open: %v", err)
	}
	// From before the replica joins, as the engine's view is.
	resp, err := cli.Get(ctx, prefix+"meta")
	if err != nil {
		cancel()
		t.Fatalf("get meta: %v", err)
	}
	after := resp.Header.Revision
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = s.Close() }()
		for ctx.Err() == nil {
			_ = s.Follow(ctx, storeetcd.Position(after), func(uint64, []*engine.Change) {})
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond): // etcd's leader lost
			}
			if resp, err := cli.Get(ctx, prefix+"meta"); err == nil {
				after = resp.Header.Revision
			}
		}
	}()
	return sync.OnceFunc(func() {
		cancel()
		<-done
	})
}

// gain runs on the replica's feed (Observe, from the store's Follow).
func (r *replica) gain(shards []int, rev int64) {
	// The claim revision: the newest creation of the gained keys (read
	// at rev: they may be gone by now).
	resp, err := r.e.cli.Get(context.Background(), r.e.prefix+"shards/", clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		r.e.t.Errorf("%s: Gain: %v", r.id, err)
		return
	}
	keys := map[string]int64{}
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = kv.CreateRevision
	}
	var newest int64
	for _, s := range shards {
		newest = max(newest, keys[fmt.Sprintf("%sshards/%04d", r.e.prefix, s)])
	}
	if newest != rev {
		r.e.t.Errorf("%s: Gain(%d shards) with revision %d, want the claim's %d", r.id, len(shards), rev, newest)
	}
	r.e.probing.gain(r.id, shards)
	r.mu.Lock()
	r.gains = append(r.gains, gainCall{slices.Clone(shards), rev})
	r.mu.Unlock()
}

// drop runs on the replica's feed: shards taken from its lease.
func (r *replica) drop(shards []int) {
	r.e.probing.lose(r.id, shards)
	r.mu.Lock()
	r.drops = append(r.drops, slices.Clone(shards))
	r.mu.Unlock()
}

func (r *replica) lose(ctx context.Context, shards []int) error {
	r.e.probing.lose(r.id, shards)
	call := loseCall{shards: slices.Clone(shards)}
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
		if r.c.Owns(r.e.names[s]) {
			call.owned++
		}
		if _, l, ok := r.c.Fence(r.e.names[s]); ok && l == lease {
			call.fenced++
		}
	}
	r.mu.Lock()
	r.loses = append(r.loses, call)
	r.mu.Unlock()
	return nil
}

// dropped returns copies of the recorded Drop calls.
func (r *replica) dropped() [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.drops)
}

// calls returns copies of the recorded Gain and Lose calls.
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
