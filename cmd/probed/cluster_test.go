package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/keyspace"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/refused"
	"github.com/probed/probed/store/codec"
	probedtel "github.com/probed/probed/telemetry"
)

// The cluster tests run real probed replicas (--store=etcd, this
// package's binary) over real etcd servers in the test process, the
// targets being the crash test's loopback backends, and check issue 15's
// promises from what etcd holds and what the backends saw. They use the
// real clock: bounds have the margins a loaded 2-core machine needs, and
// every wait polls.
const (
	clusterTTL    = 2 * time.Second
	clusterSettle = time.Second
	clusterPeriod = 500 * time.Millisecond
	clusterPrefix = "/probed/"
	clusterShards = 4096
	// clusterSlack is added to every time bound: the processes share 2
	// loaded cores with the test and etcd (etcd alone expires a lease up
	// to 500 ms late).
	clusterSlack = 3 * time.Second
	// clusterLongEnv runs the long cluster tests (SIGSTOP, a fourth
	// replica, etcd's leader lost) besides the SIGKILL one, which always
	// runs (-short: with fewer targets).
	clusterLongEnv = "PROBED_CLUSTER_LONG"
)

// clusterPoll polls what etcd or a replica's metrics say: each poll is a
// range read of the owner keys or a scrape, too much to repeat every few
// milliseconds beside the replicas on 2 loaded cores.
var clusterPoll = poll.Every(20 * time.Millisecond)

// clusterLong skips a long cluster test unless clusterLongEnv is set and
// -short is not.
func clusterLong(t *testing.T) {
	t.Helper()
	if testing.Short() || os.Getenv(clusterLongEnv) == "" {
		t.Skipf("a long cluster test: runs without -short and with %s=1 (make test-cluster)", clusterLongEnv)
	}
}

// TestClusterKillReplica: SIGKILL one of three replicas (1,000 targets, 500
// ms period; 300 with -short) and check that
//   - within 2 × lease TTL every one of its shards has another owner, and
//     each of its targets has been probed again (seen at the backends);
//   - no shard ever had two owners (etcd's history of the owner keys);
//   - two watchers running through the kill, one of them on the killed
//     replica (it resumes on another), deliver exactly the events etcd's
//     history of P/events holds: every revision once, in order, no gap.
func TestClusterKillReplica(t *testing.T) {
	targets := crashTargets
	if testing.Short() {
		targets = 300
	}
	began := time.Now()
	run := startClusterRun(t, 1, clusterTTL, 3, targets)
	ctx := t.Context()

	// Watcher a on any replica; the replica it is on is the one killed.
	// Watcher b on the two others.
	a := run.watch(t, run.addrs(nil))
	victim := run.replicaAt(t, a.peers.first(t))
	b := run.watch(t, run.addrs(victim))
	run.create(t, targets)
	run.waitStableReady(t, targets)

	flipCtx, stopFlips := context.WithCancel(ctx)
	var flipping sync.WaitGroup
	defer flipping.Wait()
	defer stopFlips()
	flipping.Go(func() { run.backends.flipEvery(flipCtx, 4*clusterPeriod, 6*clusterPeriod) })
	waitTransitions(t, crashFlipping/2, a, b) // transitions before the kill

	owners := run.owners(t)
	var lost []int
	for s, id := range owners {
		if id == victim.id {
			lost = append(lost, s)
		}
	}
	lostTargets := run.targetsIn(targets, lost)
	if len(lost) == 0 || len(lostTargets) == 0 {
		t.Fatalf("%s owns %d shards, %d of the %d targets: nothing to take over", victim.id, len(lost), len(lostTargets), targets)
	}
	joined := run.memberRevisions(t)
	delete(joined, victim.id)
	killedAt := victim.kill()

	// Its shards get other owners, its targets are probed again.
	var expiredAfter, ownedAfter, probedAfter time.Duration
	clusterPoll.UntilMet(t, "the killed replica's shards owned and its targets probed again", 30*time.Second, func() string {
		if expiredAfter == 0 && !run.exists(t, clusterPrefix+"members/"+victim.id) {
			expiredAfter = time.Since(killedAt)
		}
		if ownedAfter == 0 {
			now := run.owners(t)
			if !slices.ContainsFunc(lost, func(s int) bool { id, ok := now[s]; return !ok || id == victim.id }) {
				ownedAfter = time.Since(killedAt)
			}
		}
		if probedAfter == 0 && !slices.ContainsFunc(lostTargets, func(i int) bool { return !run.backends.probedSince(i, killedAt) }) {
			probedAfter = time.Since(killedAt)
		}
		if ownedAfter == 0 || probedAfter == 0 {
			return fmt.Sprintf("shards owned again after %v, targets probed again after %v (0: not yet)", ownedAfter, probedAfter)
		}
		return ""
	})
	t.Logf("%s killed with %d of %d shards (%d of %d targets): its lease expired after %v, its shards owned by others after %v, every target probed again after %v (2 × TTL = %v)",
		victim.id, len(lost), clusterShards, len(lostTargets), targets, expiredAfter.Round(time.Millisecond), ownedAfter.Round(time.Millisecond), probedAfter.Round(time.Millisecond), 2*clusterTTL)
	if bound := 2*clusterTTL + clusterSlack; ownedAfter > bound || probedAfter > bound {
		t.Errorf("failover took %v (owned) and %v (probed again), more than 2 × lease TTL = %v (+ %v for a loaded machine)", ownedAfter, probedAfter, 2*clusterTTL, clusterSlack)
	}

	// Transitions after the failover too, then compare with etcd.
	waitTransitions(t, crashFlipping/2, a, b)
	stopFlips()
	flipping.Wait()
	run.checkKept(t, joined)
	upTo := run.checkWatchers(t, a, b)
	run.checkOwnerHistory(t, upTo)
	if !a.peers.includes(victim.addr()) || len(a.peers.list()) < 2 {
		t.Errorf("watcher a's streams went to %v: want the killed replica %s first, then another", a.peers.list(), victim.addr())
	}
	t.Logf("cluster kill test took %v", time.Since(began).Round(time.Millisecond))
}

// TestClusterStopReplica: SIGSTOP a replica past its lease TTL, then
// SIGCONT: etcd holds no write of it made after its lease expired (its
// P/writers keys' history against the deletion of its member key), and it
// rejoins and owns shards again.
func TestClusterStopReplica(t *testing.T) {
	clusterLong(t)
	const targets = 300
	began := time.Now()
	run := startClusterRun(t, 1, clusterTTL, 3, targets)
	ctx := t.Context()
	run.create(t, targets)
	run.waitStableReady(t, targets)
	flipCtx, stopFlips := context.WithCancel(ctx)
	var flipping sync.WaitGroup
	defer flipping.Wait()
	defer stopFlips()
	// Flips as fast as the probes see them: the stopped replica has
	// transitions to write when it wakes.
	flipping.Go(func() { run.backends.flipEvery(flipCtx, clusterPeriod, 2*clusterPeriod) })
	victim := run.replicas[1]
	waitWrites(t, victim, 3)
	memberKey := clusterPrefix + "members/" + victim.id
	stoppedRev := run.revision(t)
	victim.signal(t, syscall.SIGSTOP)
	stoppedAt := time.Now()
	// (A failure kills the stopped replica: SIGKILL ends a stopped process.)
	clusterPoll.Until(t, "the stopped replica's member key gone", 4*clusterTTL, func() bool { return !run.exists(t, memberKey) })
	expiredAfter := time.Since(stoppedAt)
	// Survivors take its shards while it sleeps; then it wakes.
	clusterPoll.Until(t, "the survivors owning the stopped replica's shards", 6*clusterTTL-time.Since(stoppedAt), func() bool {
		owners := run.owners(t)
		return countOwned(owners, victim.id) == 0 && len(owners) == clusterShards
	})
	run.waitProbedSince(t, time.Now(), run.allTargets(targets)) // by the survivors
	contRev := run.revision(t)
	victim.signal(t, syscall.SIGCONT)
	contAt := time.Now()

	// It rejoins and owns shards again.
	clusterPoll.UntilMet(t, victim.id+" owning shards after SIGCONT", clusterSettle+5*clusterTTL+10*time.Second, func() string {
		if countOwned(run.owners(t), victim.id) == 0 {
			return "none yet; its log:\n" + victim.clusterLog()
		}
		return ""
	})
	rejoined := time.Since(contAt)
	waitWrites(t, victim, 1) // it writes transitions again
	stopFlips()
	flipping.Wait()
	if !victim.running() {
		t.Fatalf("%s exited after SIGCONT:\n%s", victim.id, victim.log())
	}

	// etcd's history: the member key's deletion (lease expiry: while the
	// process was stopped) and the writes of the replica around it.
	upTo := run.revision(t)
	members := etcdHistory(t, ctx, run.cli, memberKey, false, upTo)
	var expired, rejoinedRev int64
	for _, ev := range members {
		switch {
		case ev.Type == clientv3.EventTypeDelete && expired == 0 && ev.Kv.ModRevision > stoppedRev:
			expired = ev.Kv.ModRevision
		case ev.Type == clientv3.EventTypePut && expired != 0 && rejoinedRev == 0:
			rejoinedRev = ev.Kv.ModRevision
		}
	}
	if expired == 0 || expired > contRev || rejoinedRev == 0 {
		t.Fatalf("member key history %s: want a deletion between revisions %d (SIGSTOP) and %d (SIGCONT), then a put", clusterEvents(members), stoppedRev, contRev)
	}
	// Its writer keys: P/writers/<id>, and P/writers/<id>/<k> of the
	// Commits in flight beside another.
	writes := etcdHistory(t, ctx, run.cli, clusterPrefix+"writers/"+victim.id, false, upTo)
	writes = append(writes, etcdHistory(t, ctx, run.cli, clusterPrefix+"writers/"+victim.id+"/", true, upTo)...)
	var before, stale, after int
	for _, ev := range writes {
		switch rev := ev.Kv.ModRevision; {
		case rev < expired:
			before++
		case rev < rejoinedRev:
			stale++
			t.Errorf("%s wrote at revision %d, after its lease expired (member key deleted at %d) and before it rejoined (%d)", victim.id, rev, expired, rejoinedRev)
		default:
			after++
		}
	}
	if before == 0 {
		t.Errorf("%s wrote nothing before SIGSTOP: the fence was not exercised", victim.id)
	}
	run.checkOwnerHistory(t, upTo)
	t.Logf("%s: member key deleted %v after SIGSTOP (etcd revision %d); SIGCONT at revision %d; owns shards again %v after SIGCONT (rejoined at revision %d); its writes: %d before expiry, %d between expiry and rejoin, %d after; changes the store refused it (%s): %v; took %v",
		victim.id, expiredAfter.Round(time.Millisecond), expired, contRev, rejoined.Round(time.Millisecond), rejoinedRev, before, stale, after,
		probedtel.MetricStoreRefused, victim.metric(t, probedtel.MetricStoreRefused), time.Since(began).Round(time.Millisecond))
}

// TestClusterJoin: a fourth replica joins three: about a quarter of the
// shards move (all to it), not more than 30%, and no target of a moved
// shard goes unprobed longer than one period + TTL (at the backends).
func TestClusterJoin(t *testing.T) {
	clusterLong(t)
	const targets = crashTargets
	began := time.Now()
	run := startClusterRun(t, 1, clusterTTL, 3, targets)
	run.create(t, targets)
	run.waitStableReady(t, targets)
	before := run.owners(t)
	joined := run.memberRevisions(t)

	run.backends.resetGaps()
	joinAt := time.Now()
	newcomer := run.start(t, 1)[0]
	// Wait until it owns shards and the assignment is still.
	var owners map[int]string
	stillSince, prev := time.Now(), -1
	clusterPoll.UntilMet(t, newcomer.id+" owning shards, the assignment still for a lease TTL", clusterSettle+10*clusterTTL+20*time.Second-time.Since(joinAt), func() string {
		owners = run.owners(t)
		n := countOwned(owners, newcomer.id)
		if n != prev || len(owners) < clusterShards {
			prev, stillSince = n, time.Now()
		}
		if n == 0 || time.Since(stillSince) <= clusterTTL {
			return fmt.Sprintf("%s owns %d shards, %d of %d owned, still for %v", newcomer.id, n, len(owners), clusterShards, time.Since(stillSince).Round(time.Millisecond))
		}
		return ""
	})
	var moved []int
	for s, id := range owners {
		if before[s] != id {
			moved = append(moved, s)
			if id != newcomer.id {
				t.Errorf("shard %d moved from %s to %s, not to the newcomer", s, before[s], id)
			}
		}
	}
	share := float64(len(moved)) / clusterShards
	if share < 0.15 || share > 0.30 {
		t.Errorf("%d of %d shards (%.1f%%) moved when a fourth replica joined: want about a quarter, at most 30%%", len(moved), clusterShards, 100*share)
	}
	// Every target of a moved shard: probed by the newcomer since, and
	// never unprobed longer than one period + TTL.
	movedTargets := run.targetsIn(targets, moved)
	run.waitProbedSince(t, time.Now(), movedTargets)
	bound := clusterPeriod + clusterTTL
	var longest time.Duration
	for _, i := range movedTargets {
		gap := run.backends.longestGap(i)
		longest = max(longest, gap)
		if gap > bound+clusterSlack {
			t.Errorf("target %s (a moved shard) went %v without a probe, more than one period + TTL = %v (+ %v for a loaded machine)", crashName(i), gap.Round(time.Millisecond), bound, clusterSlack)
		}
	}
	run.checkKept(t, joined)
	run.checkOwnerHistory(t, run.revision(t))
	t.Logf("%s joined: %d shards (%.1f%%), %d targets moved; the longest a moved target went unprobed: %v (bound %v); assignment still %v after the start; took %v",
		newcomer.id, len(moved), 100*share, len(movedTargets), longest.Round(time.Millisecond), bound, stillSince.Sub(joinAt).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// TestClusterEtcdLeaderLost: a three-member etcd loses its leader
// (killed: no leadership transfer) while backends flip: every flip is a
// transition in etcd and seen by a watcher, and no replica restarts (the
// processes run on, their member keys are the ones they made at start).
// The replicas run with the default lease TTL (5s): an etcd election must
// not cost a replica its lease.
func TestClusterEtcdLeaderLost(t *testing.T) {
	clusterLong(t)
	const (
		targets = 200
		ttl     = 5 * time.Second
	)
	began := time.Now()
	run := startClusterRun(t, 3, ttl, 3, targets)
	ctx := t.Context()
	w := run.watch(t, run.addrs(nil))
	run.create(t, targets)
	run.waitStableReady(t, targets)
	joined := run.memberRevisions(t)

	// Wait until every flipping target's readiness is the backend's, then
	// count its transitions from there.
	baseline := w.waitFlipping(t, run.backends, 30*time.Second)
	flipCtx, stopFlips := context.WithCancel(ctx)
	var flipping sync.WaitGroup
	defer flipping.Wait()
	defer stopFlips()
	flipping.Go(func() { run.backends.flipEvery(flipCtx, 3*clusterPeriod, 5*clusterPeriod) })
	waitTransitions(t, crashFlipping, w)

	leader, err := run.etcd.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run.etcd.Kill(leader)
	killedAt := time.Now()
	newLeader, err := run.etcd.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	elected := time.Since(killedAt)
	waitTransitions(t, 2*crashFlipping, w)
	stopFlips()
	flipping.Wait()
	final := w.waitFlipping(t, run.backends, 30*time.Second)

	flips := 0
	for i := range crashFlipping {
		n := int(run.backends.flips[i].Load())
		flips += n
		if got := final[i] - baseline[i]; got != n {
			t.Errorf("%s: %d readiness transitions seen while its backend flipped %d times", crashName(i), got, n)
		}
	}
	w.checkChains(t)
	for _, r := range run.replicas {
		if !r.running() {
			t.Errorf("%s exited:\n%s", r.id, r.log())
		}
	}
	upTo := run.checkWatchers(t, w)
	run.checkKept(t, joined)
	run.checkOwnerHistory(t, upTo)
	t.Logf("etcd leader m%d killed; m%d elected after %v; %d flips, every one a transition in etcd and at the watcher; no replica restarted; took %v",
		leader, newLeader, elected.Round(time.Millisecond), flips, time.Since(began).Round(time.Millisecond))
}

// clusterRun is an etcd cluster, the probed replicas over it, the
// backends of the targets and a client of etcd.
type clusterRun struct {
	t        *testing.T
	bin      string
	etcd     *etcdtest.Cluster
	cli      *clientv3.Client
	ttl      time.Duration
	backends *crashBackends
	replicas []*clusterReplica
	client   *client.Client
	// extraArgs, if set, gives a replica's flags beyond the cluster's.
	extraArgs func(id string) []string
}

// clusterReplica is one probed process of the cluster.
type clusterReplica struct {
	id      string
	metrics string // --metrics-addr
	*crashProcess
}

// metric reads a counter or gauge without labels from the replica's
// Prometheus endpoint.
func (r *clusterReplica) metric(t *testing.T, name string) float64 {
	t.Helper()
	return scrapeMetric(t, r.metrics, name)
}

// clusterLog is the replica's log lines about the cluster (joins,
// leases, shards gained and lost), to explain a failure.
func (r *clusterReplica) clusterLog() string {
	var out []string
	for line := range strings.Lines(r.log()) {
		for _, word := range []string{"lease", "shards", "joined", "cluster", "heartbeat", "etcd"} {
			if strings.Contains(line, word) {
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out, "")
}

// startClusterRun starts an etcd of members members and n replicas, and
// waits until every shard is owned, each replica owning some.
func startClusterRun(t *testing.T, members int, ttl time.Duration, n, targets int) *clusterRun {
	t.Helper()
	run := newClusterRun(t, members, ttl)
	run.begin(t, n)
	return run
}

// newClusterRun starts an etcd of members members, and no replica yet.
func newClusterRun(t *testing.T, members int, ttl time.Duration) *clusterRun {
	t.Helper()
	run := &clusterRun{t: t, bin: buildProbed(t), ttl: ttl, backends: newCrashBackends(t, 4)}
	if members == 1 {
		run.etcd = etcdtest.Start(t)
	} else {
		run.etcd = etcdtest.StartCluster(t, members, etcdtest.Options{})
	}
	run.cli = run.etcd.Client(t)
	return run
}

// begin starts n replicas, a client of them all, and waits until every
// shard is owned, each replica owning some.
func (run *clusterRun) begin(t *testing.T, n int) {
	t.Helper()
	run.start(t, n)
	c, err := client.Dial(t.Context(), run.addrs(nil), client.WithDialOptions(crashReconnect))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	run.client = c
	run.waitBalanced(t)
}

// start starts n more replicas at once and waits until they serve.
func (run *clusterRun) start(t *testing.T, n int) []*clusterReplica {
	t.Helper()
	var started []*clusterReplica
	for range n {
		id := "r" + strconv.Itoa(len(run.replicas)+1)
		metrics := refused.Reserve(t).Addr()
		args := []string{"--addr", refused.Reserve(t).Addr(), "--store=etcd",
			"--etcd-endpoints", strings.Join(run.etcd.Endpoints(), ","), "--etcd-prefix", clusterPrefix,
			"--lease-ttl", run.ttl.String(), "--settle", clusterSettle.String(), "--replica-id", id,
			"--metrics-addr", metrics, "--registrations-per-second=0"}
		if run.extraArgs != nil {
			args = append(args, run.extraArgs(id)...)
		}
		if _, err := parseFlags(args, io.Discard); err != nil {
			t.Fatalf("replica flags %v: %v", args, err)
		}
		r := &clusterReplica{id: id, metrics: metrics, crashProcess: &crashProcess{t: t, bin: run.bin, args: args}}
		r.startAsync()
		t.Cleanup(func() {
			_ = r.kill()
			if t.Failed() {
				t.Logf("%s's cluster log:\n%s", r.id, r.clusterLog())
			}
		})
		run.replicas = append(run.replicas, r)
		started = append(started, r)
	}
	for _, r := range started {
		if err := r.wait(); err != nil {
			t.Fatalf("%s: %v", r.id, err)
		}
	}
	return started
}

// waitBalanced waits until every shard is owned and every replica owns
// at least a fifth of what an even share would be.
func (run *clusterRun) waitBalanced(t *testing.T) {
	t.Helper()
	clusterPoll.UntilMet(t, "the shards spread over the replicas", clusterSettle+10*run.ttl+20*time.Second, func() string {
		owners := run.owners(t)
		ok := len(owners) == clusterShards
		for _, r := range run.replicas {
			ok = ok && countOwned(owners, r.id) >= clusterShards/len(run.replicas)/5
		}
		if !ok {
			return fmt.Sprintf("%d of %d shards owned", len(owners), clusterShards)
		}
		return ""
	})
}

// addrs is the comma-separated list of the running replicas' addresses
// but except's.
func (run *clusterRun) addrs(except *clusterReplica) string {
	var out []string
	for _, r := range run.replicas {
		if r != except && r.proc != nil {
			out = append(out, r.addr())
		}
	}
	return strings.Join(out, ",")
}

// replicaAt is the replica serving at addr.
func (run *clusterRun) replicaAt(t *testing.T, addr string) *clusterReplica {
	t.Helper()
	for _, r := range run.replicas {
		if r.addr() == addr {
			return r
		}
	}
	t.Fatalf("no replica at %s", addr)
	return nil
}

// create registers targets t-0000.. probing their backends every
// clusterPeriod, spread over the replicas.
func (run *clusterRun) create(t *testing.T, targets int) {
	t.Helper()
	crashCreate(t, t.Context(), run.client, run.backends, targets, clusterPeriod)
}

// waitStableReady waits until every stable target is ready.
func (run *clusterRun) waitStableReady(t *testing.T, targets int) {
	t.Helper()
	crashWaitReady(t, t.Context(), run.client, targets-crashFlipping-crashDown, 60*time.Second)
}

// owners reads the owner of every owned shard from etcd.
func (run *clusterRun) owners(t *testing.T) map[int]string {
	t.Helper()
	resp, err := run.cli.Get(t.Context(), clusterPrefix+"shards/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		s, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), clusterPrefix+"shards/"))
		if err != nil {
			t.Fatalf("shard key %q: %v", kv.Key, err)
		}
		out[s] = string(kv.Value)
	}
	return out
}

func countOwned(owners map[int]string, id string) int {
	n := 0
	for _, o := range owners {
		if o == id {
			n++
		}
	}
	return n
}

// memberRevisions is each member key's create revision.
func (run *clusterRun) memberRevisions(t *testing.T) map[string]int64 {
	t.Helper()
	resp, err := run.cli.Get(t.Context(), clusterPrefix+"members/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]int64)
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), clusterPrefix+"members/")] = kv.CreateRevision
	}
	return out
}

// checkKept checks that every replica of joined (member key create
// revisions, from memberRevisions) still has the member key it had: a
// replica that lost its lease (and rejoined) makes a new one. On a machine
// too loaded for the TTL (a replica starved of CPU, or etcd in the test
// process answering late) that is what breaks the other bounds, and this
// says so.
func (run *clusterRun) checkKept(t *testing.T, joined map[string]int64) {
	t.Helper()
	now := run.memberRevisions(t)
	for id, rev := range joined {
		if now[id] != rev {
			t.Errorf("%s lost its lease during the test: its member key was made at revision %d, now %d (0: none); a replica starved of CPU or etcd too slow for a %v TTL", id, rev, now[id], run.ttl)
		}
	}
}

func (run *clusterRun) exists(t *testing.T, key string) bool {
	t.Helper()
	resp, err := run.cli.Get(t.Context(), key, clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count > 0
}

// revision is etcd's current revision.
func (run *clusterRun) revision(t *testing.T) int64 {
	t.Helper()
	resp, err := run.cli.Get(t.Context(), clusterPrefix+"meta")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// targetsIn returns the indexes of the targets (of the first n) whose
// shard is one of shards (a target's shard: fnv-1a of its name modulo the
// shard count, as docs/cluster.md says).
func (run *clusterRun) targetsIn(n int, shards []int) []int {
	set := make(map[int]bool, len(shards))
	for _, s := range shards {
		set[s] = true
	}
	var out []int
	for i := range n {
		h := fnv.New32a()
		_, _ = h.Write([]byte(crashName(i)))
		if set[int(h.Sum32()%clusterShards)] {
			out = append(out, i)
		}
	}
	return out
}

// checkOwnerHistory reads the history of every shard owner key from etcd
// revision 1 to upTo: a key is put on a new lease only when it did not
// exist (the previous owner's key was deleted first), so no shard ever had
// two owners.
func (run *clusterRun) checkOwnerHistory(t *testing.T, upTo int64) {
	t.Helper()
	type owner struct {
		lease int64
		id    string
	}
	current := make(map[string]owner)
	claims := 0
	for _, ev := range etcdHistory(t, t.Context(), run.cli, clusterPrefix+"shards/", true, upTo) {
		key := string(ev.Kv.Key)
		prev, held := current[key]
		switch ev.Type {
		case clientv3.EventTypeDelete:
			delete(current, key)
		case clientv3.EventTypePut:
			if held && prev.lease != ev.Kv.Lease {
				t.Errorf("%s put at revision %d for %s on lease %x while %s's key on lease %x still existed: two owners", key, ev.Kv.ModRevision, ev.Kv.Value, ev.Kv.Lease, prev.id, prev.lease)
			}
			if !held {
				claims++
			}
			current[key] = owner{lease: ev.Kv.Lease, id: string(ev.Kv.Value)}
		}
	}
	if claims < clusterShards {
		t.Errorf("%d claims in etcd's history of the owner keys: fewer than the %d shards", claims, clusterShards)
	}
	t.Logf("owner keys: %d claims up to etcd revision %d, never two owners of a shard", claims, upTo)
}

// checkWatchers compares what the watchers delivered with etcd's history
// of P/events up to etcd's current revision (once every watcher is past
// it): the same events, every revision once, in order. It returns the
// revision compared up to.
func (run *clusterRun) checkWatchers(t *testing.T, watchers ...*clusterWatcher) int64 {
	t.Helper()
	upTo := run.revision(t)
	pos := keyspace.Position(upTo)
	for _, w := range watchers {
		poll.UntilMet(t, fmt.Sprintf("watcher %s past etcd revision %d (%d)", w.name, upTo, pos), 30*time.Second, func() string {
			if got := w.progressNow(); got < pos {
				return fmt.Sprintf("at %d", got)
			}
			return ""
		})
	}
	var want []crashEvent
	for _, ev := range etcdHistory(t, t.Context(), run.cli, clusterPrefix+"events", false, upTo) {
		changes, err := codec.UnmarshalBatch(ev.Kv.Value)
		if err != nil {
			t.Fatalf("P/events at revision %d: %v", ev.Kv.ModRevision, err)
		}
		for i, c := range changes {
			want = append(want, crashEvent{rev: uint64(ev.Kv.ModRevision)<<10 | uint64(i), name: c.Name})
		}
	}
	for _, w := range watchers {
		w.mu.Lock()
		var got []crashEvent
		for _, ev := range w.events {
			if ev.rev <= pos {
				got = append(got, crashEvent{rev: ev.rev, name: ev.name})
			}
		}
		problems := slices.Clone(w.problems)
		w.mu.Unlock()
		for _, p := range problems {
			t.Errorf("watcher %s: %s", w.name, p)
		}
		if i := clusterFirstDifference(got, want); i >= 0 {
			t.Errorf("watcher %s delivered %d events up to etcd revision %d, etcd holds %d; first difference at #%d: got %v, etcd %v",
				w.name, len(got), upTo, len(want), i, clusterEventAt(got, i), clusterEventAt(want, i))
		}
	}
	t.Logf("%d watchers delivered exactly the %d events etcd holds up to etcd revision %d", len(watchers), len(want), upTo)
	return upTo
}

func clusterFirstDifference(a, b []crashEvent) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

func clusterEventAt(evs []crashEvent, i int) any {
	if i < len(evs) {
		return evs[i]
	}
	return "nothing"
}

// etcdHistory returns the events of key (a prefix if prefix) from etcd
// revision 1 to upTo, read with a watch (etcd's only history read); it
// fails the test if the history was compacted.
func etcdHistory(t *testing.T, ctx context.Context, cli *clientv3.Client, key string, prefix bool, upTo int64) []*clientv3.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), 60*time.Second)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithRev(1)}
	if prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	wch := cli.Watch(ctx, key, opts...)
	// A progress notification comes once the watch has caught up: its
	// revision says the history up to it was delivered.
	var asking sync.WaitGroup
	defer asking.Wait()
	defer cancel()
	asking.Go(func() {
		for ctx.Err() == nil {
			_ = cli.RequestProgress(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	var out []*clientv3.Event
	for resp := range wch {
		if err := resp.Err(); err != nil {
			t.Fatalf("etcd history of %s: %v", key, err)
		}
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision > upTo {
				return out
			}
			out = append(out, ev)
		}
		if resp.IsProgressNotify() && resp.Header.Revision >= upTo {
			return out
		}
	}
	t.Fatalf("etcd history of %s: the watch ended before revision %d", key, upTo)
	return nil
}

func clusterEvents(evs []*clientv3.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%s@%d ", ev.Type, ev.Kv.ModRevision)
	}
	return b.String()
}

// clusterWatcher is a crash watcher over a client of its own, which
// records the replica each of its streams went to.
type clusterWatcher struct {
	*crashWatcher
	peers *streamPeers
}

// watch starts a watcher from revision 1 through the replicas at addrs.
func (run *clusterRun) watch(t *testing.T, addrs string) *clusterWatcher {
	t.Helper()
	peers := &streamPeers{}
	c, err := client.Dial(t.Context(), addrs, client.WithDialOptions(crashReconnect, grpc.WithStreamInterceptor(peers.intercept)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &clusterWatcher{crashWatcher: crashWatch(t.Context(), c, addrs, 1, nil), peers: peers}
}

// readiness returns, for each flipping target, the number of readiness
// transitions w delivered and the latest result.
func (w *clusterWatcher) readiness() (counts [crashFlipping]int, latest [crashFlipping]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range w.events {
		i, ok := crashIndex(ev.name)
		switch {
		case !ok || i >= crashFlipping:
		case ev.kind == "created":
			latest[i] = "failure" // not ready until a probe succeeds
		case ev.kind == "transition" && ev.probe == "readiness":
			counts[i]++
			latest[i] = ev.to
		}
	}
	return counts, latest
}

// waitFlipping waits until every flipping target's latest readiness, as
// w delivered it, is its backend's, and returns the transition counts.
func (w *clusterWatcher) waitFlipping(t *testing.T, b *crashBackends, limit time.Duration) [crashFlipping]int {
	t.Helper()
	var counts [crashFlipping]int
	poll.Every(50*time.Millisecond).UntilMet(t, "every flipping target's readiness at the watcher its backend's", limit, func() string {
		var latest [crashFlipping]string
		counts, latest = w.readiness()
		for i := range crashFlipping {
			want := "success"
			if b.status[i].Load() != http.StatusOK {
				want = "failure"
			}
			if latest[i] != want {
				return fmt.Sprintf("%s's is %q, its backend answers %d", crashName(i), latest[i], b.status[i].Load())
			}
		}
		return ""
	})
	return counts
}

// checkChains checks that each flipping target's readiness transitions
// follow each other: each starts where the one before ended.
func (w *clusterWatcher) checkChains(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	last := make(map[string]crashEvent)
	for _, ev := range w.events {
		if ev.probe != "readiness" || ev.kind != "transition" {
			continue
		}
		if prev, ok := last[ev.name]; ok && prev.to != ev.from {
			t.Errorf("%s: transition %v follows %v: one is missing between", ev.name, ev, prev)
		}
		last[ev.name] = ev
	}
}

// streamPeers records the address each client stream went to.
type streamPeers struct {
	mu    sync.Mutex
	addrs []string
}

func (p *streamPeers) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err == nil {
		if pr, ok := peer.FromContext(cs.Context()); ok {
			p.mu.Lock()
			p.addrs = append(p.addrs, pr.Addr.String())
			p.mu.Unlock()
		}
	}
	return cs, err
}

func (p *streamPeers) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.addrs)
}

func (p *streamPeers) includes(addr string) bool { return slices.Contains(p.list(), addr) }

// first waits for the first stream and returns its address.
func (p *streamPeers) first(t *testing.T) string {
	t.Helper()
	poll.Until(t, "the watcher's first stream", 30*time.Second, func() bool { return len(p.list()) > 0 })
	return p.list()[0]
}

// sumMetric is the sum of the metric lines of text whose name is name
// (with or without labels).
func sumMetric(text, name string) float64 {
	var sum float64
	for line := range strings.Lines(text) {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		fields := strings.Fields(rest)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// transitions is the number of readiness transitions of the flipping
// targets w delivered.
func (w *clusterWatcher) transitions() int {
	counts, _ := w.readiness()
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// waitTransitions waits until each watcher delivered n readiness
// transitions more than when it was called: the backends flipped, the
// replicas probed and wrote it, the watchers got it.
func waitTransitions(t *testing.T, n int, ws ...*clusterWatcher) {
	t.Helper()
	from := make([]int, len(ws))
	for i, w := range ws {
		from[i] = w.transitions()
	}
	poll.UntilMet(t, "readiness transitions at the watchers", 60*time.Second, func() string {
		for i, w := range ws {
			if got := w.transitions() - from[i]; got < n {
				return fmt.Sprintf("watcher %d delivered %d transitions, want %d", i, got, n)
			}
		}
		return ""
	})
}

// waitWrites waits until r found (and wrote) n readiness or liveness
// transitions more than when it was called.
func waitWrites(t *testing.T, r *clusterReplica, n float64) {
	t.Helper()
	from := r.metricSum(t, probedtel.MetricTransitions)
	poll.UntilMet(t, r.id+" to write transitions", 60*time.Second, func() string {
		if got := r.metricSum(t, probedtel.MetricTransitions) - from; got < n {
			return fmt.Sprintf("%v transitions, want %v", got, n)
		}
		return ""
	})
}

// waitProbedSince waits until each of the targets had a request after at.
func (run *clusterRun) waitProbedSince(t *testing.T, at time.Time, targets []int) {
	t.Helper()
	poll.UntilMet(t, "the targets to be probed", 60*time.Second, func() string {
		for _, i := range targets {
			if !run.backends.probedSince(i, at) {
				return crashName(i) + " not probed yet"
			}
		}
		return ""
	})
}

// allTargets is t-0000 up to n.
func (run *clusterRun) allTargets(n int) []int {
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return all
}
