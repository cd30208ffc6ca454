package cluster_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/probed/probed/cluster"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/refused"
)

// memberEnv names the environment variable that makes this test binary an
// etcd member (TestMain): name, data directory, client URL, peer URL and
// the initial cluster, separated by spaces.
const memberEnv = "PROBED_TEST_ETCD_MEMBER"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(memberEnv); cfg != "" {
		runMember(cfg)
		return
	}
	goleak.VerifyTestMain(m, etcdtest.LeakOptions()...)
}

// runMember runs an etcd member until the process is killed.
func runMember(spec string) {
	f := strings.Fields(spec)
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = f[0], f[1]
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = "error"
	client, _ := url.Parse(f[2])
	peer, _ := url.Parse(f[3])
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = f[4]
	cfg.InitialClusterToken = "pause"
	// etcd's default timing: TickMs 100, ElectionMs 1000.
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	<-e.Err()
	os.Exit(1)
}

// startMemberProcesses starts an etcd of n members, each a process of its
// own (so that it can be paused), and returns their processes and client
// endpoints.
func startMemberProcesses(t *testing.T, n int) ([]*os.Process, []string) {
	t.Helper()
	clients, peers, initial := make([]string, n), make([]string, n), make([]string, n)
	for i := range n {
		clients[i] = "http://" + refused.Reserve(t).Addr()
		peers[i] = "http://" + refused.Reserve(t).Addr()
		initial[i] = fmt.Sprintf("m%d=%s", i, peers[i])
	}
	procs := make([]*os.Process, n)
	for i := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), memberEnv+"="+strings.Join([]string{
			fmt.Sprintf("m%d", i), t.TempDir(), clients[i], peers[i], strings.Join(initial, ","),
		}, " "))
		cmd.Stderr = os.Stderr
		// A member never outlives the test binary (a timeout kills it).
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = cmd.Process
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	return procs, clients
}

// leaderOf returns the index of the endpoint whose member leads.
func leaderOf(t *testing.T, endpoints []string) int {
	t.Helper()
	leader := -1
	poll.Until(t, "an etcd leader", 30*time.Second, func() bool {
		for i, ep := range endpoints {
			cli := etcdtest.ClientOf(t, ep)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			st, err := cli.Status(ctx, ep)
			cancel()
			_ = cli.Close()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

// TestLeaderPauseKeepsLease (issue 22, item 8): the leader of a 3-member
// etcd, each member a process, is paused (SIGSTOP) for 1.5 s, several
// times; the replica (lease TTL 4 s, renewals every 1.33 s) keeps its
// lease each time. etcd resets leases when it promotes a new leader: only
// the replica's own renewals could lose it. The members elect with etcd's
// default timing (an election timeout of 1–2 s), and the replica's
// heartbeat takes 900 ms, most of what it may (TTL/3), as on a loaded
// host. The pause begins just before the next renewal is due (1.2 s after
// one was answered, of 1.33 s), eight times. Without the heartbeats
// running beside the renewals (progress.go), a renewal began a heartbeat
// after its tick and was retried for TTL/3; the next one came a tick and
// a heartbeat later, past the lease's local deadline: an election that
// ended more than about 1.5 s after the pause began cost the lease (one
// round in nine or so). Now a renewal is retried from its tick to the
// deadline, 2.3 s after the pause began.
func TestLeaderPauseKeepsLease(t *testing.T) {
	// A long test, with make test-cluster (without the race detector,
	// which slows the members' elections several times).
	if testing.Short() || os.Getenv("PROBED_CLUSTER_LONG") == "" {
		t.Skip("a long cluster test: runs without -short and with PROBED_CLUSTER_LONG=1 (make test-cluster)")
	}
	procs, endpoints := startMemberProcesses(t, 3)
	leaderOf(t, endpoints)
	var log logged
	c := newCluster(t, cluster.Options{
		Client:        etcdtest.ClientOf(t, endpoints...),
		Prefix:        "/probed/",
		ReplicaID:     "r",
		AdvertiseAddr: "r.example:1",
		LeaseTTL:      4 * time.Second,
		Shards:        16,
		Clock:         clockwork.NewRealClock(),
		Logger:        testLogger(t, &log),
		// A scheduler heartbeat late by most of what it may take
		// (TTL/3), as on a loaded host.
		Heartbeat: func(ctx context.Context) error {
			select {
			case <-time.After(900 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	poll.Until(t, "a lease", time.Minute, func() bool { return c.Stats().Lease != 0 })
	const after = 1200 * time.Millisecond
	for round := range 8 {
		leader := leaderOf(t, endpoints)
		renewals := c.Stats().Renewals
		poll.Until(t, "a renewal", time.Minute, func() bool { return c.Stats().Renewals != renewals })
		// The fault itself is wall-clock time, as on a real network: the
		// pause starts `after` a renewal, so that the next one is due
		// during it, and lasts 1.5 s.
		time.Sleep(after)
		_ = procs[leader].Signal(syscall.SIGSTOP)
		time.Sleep(1500 * time.Millisecond)
		_ = procs[leader].Signal(syscall.SIGCONT)
		// Then the outcome: a renewal that went through after the pause
		// (the lease held), or the lease lost.
		resumed := c.Stats()
		poll.Until(t, "a renewal or a lost lease after the pause", time.Minute, func() bool {
			st := c.Stats()
			return st.Renewals != resumed.Renewals || st.LeaseLosses != resumed.LeaseLosses
		})
		st := c.Stats()
		t.Logf("round %d: leader m%d paused 1.5s, %v after a renewal; renewals %d, failed attempts %d, leases lost %d", round, leader, after, st.Renewals, st.RenewalErrors, st.LeaseLosses)
		if st.LeaseLosses > 0 {
			t.Fatalf("the replica lost its lease when the etcd leader was paused for 1.5s (round %d)", round)
		}
	}
}
