// Package etcdtest runs real etcd servers in the test process (etcd's own
// embed package, the server probed's cluster mode talks to in production)
// and stops them when the test ends.
//
// Members listen on loopback: clients on a port the kernel picks, peers on
// ports reserved with internal/refused (a multi-member cluster must name
// every peer URL before any member starts). Data lives in t.TempDir, with
// fsync off: a test never survives a power cut.
package etcdtest

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/probed/probed/internal/refused"
)

// Options tune the members. The zero value is etcd's defaults (100 ms
// heartbeat, 1 s election timeout).
type Options struct {
	// TickMs and ElectionMs are the raft heartbeat interval and election
	// timeout; 0 keeps etcd's defaults.
	TickMs, ElectionMs uint
}

// Cluster is a running etcd cluster of one or more members.
type Cluster struct {
	members []*embed.Etcd
	cfgs    []*embed.Config // each member's, to Restart it
	stopped []bool
	closing sync.WaitGroup // members killed, still closing their listeners
}

// Start starts a single-member etcd and stops it when the test ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	return StartCluster(t, 1, Options{})
}

// StartCluster starts an n-member etcd cluster, ready (a leader elected)
// when it returns, and stops it when the test ends.
func StartCluster(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	names := make([]string, n)
	peers := make([]string, n)
	initial := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("m%d", i)
		peers[i] = "http://" + refused.Reserve(t).Addr()
		initial[i] = names[i] + "=" + peers[i]
	}
	c := &Cluster{members: make([]*embed.Etcd, n), cfgs: make([]*embed.Config, n), stopped: make([]bool, n)}
	t.Cleanup(c.stopAll)
	for i := range n {
		cfg := embed.NewConfig()
		cfg.Name = names[i]
		cfg.Dir = t.TempDir()
		cfg.UnsafeNoFsync = true
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		cfg.LogLevel = "error"
		if opts.TickMs > 0 {
			cfg.TickMs = opts.TickMs
		}
		if opts.ElectionMs > 0 {
			cfg.ElectionMs = opts.ElectionMs
		}
		client := mustURL(t, "http://127.0.0.1:0")
		peer := mustURL(t, peers[i])
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = t.Name()
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			t.Fatalf("etcdtest: start member %s: %v", names[i], err)
		}
		// A restart listens where the member listened first.
		bound := mustURL(t, "http://"+e.Clients[0].Addr().String())
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{bound}, []url.URL{bound}
		c.members[i], c.cfgs[i] = e, cfg
	}
	for i, e := range c.members {
		select {
		case <-e.Server.ReadyNotify():
		case err := <-e.Err():
			t.Fatalf("etcdtest: member %s: %v", names[i], err)
		case <-time.After(30 * time.Second):
			t.Fatalf("etcdtest: member %s not ready after 30s", names[i])
		}
	}
	return c
}

func mustURL(t testing.TB, s string) url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	return *u
}

// Endpoints are the client addresses of the running members.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for i, e := range c.members {
		if !c.stopped[i] {
			eps = append(eps, e.Clients[0].Addr().String())
		}
	}
	return eps
}

// Client returns a client of every running member, closed when the test
// ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return ClientOf(t, c.Endpoints()...)
}

// ClientOf is a client of etcd at endpoints (a proxy's, say), closed when
// the test ends.
func ClientOf(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := NewClient(endpoints...)
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Leader is the index of the member that is the raft leader, or -1 when
// none is known.
func (c *Cluster) Leader() int {
	for i, e := range c.members {
		if c.stopped[i] {
			continue
		}
		if e.Server.MemberID() == e.Server.Leader() {
			return i
		}
	}
	return -1
}

// WaitLeader waits until a running member is the leader and returns its
// index.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	for {
		if i := c.Leader(); i >= 0 {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("etcdtest: no leader: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Stop stops member i gracefully: a leader hands its leadership over
// first.
func (c *Cluster) Stop(i int) {
	if c.stopped[i] {
		return
	}
	c.stopped[i] = true
	c.members[i].Close()
}

// Kill stops member i as a crash would: its raft node stops at once, with
// no leadership transfer, so a leader's followers elect a new one only
// after their election timeout. Its listeners close in the background
// (up to etcd's request timeout, 5 s + 2 election timeouts, while
// clients' streams drain); requests to it fail meanwhile.
func (c *Cluster) Kill(i int) {
	if c.stopped[i] {
		return
	}
	c.stopped[i] = true
	e := c.members[i]
	e.Server.HardStop()
	c.closing.Go(e.Close)
}

// Restart starts the stopped member i again, from its data directory,
// on the addresses it had, and waits until it is ready.
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	if !c.stopped[i] {
		t.Fatalf("etcdtest: Restart of member %d, which runs", i)
	}
	c.closing.Wait()
	e, err := embed.StartEtcd(c.cfgs[i])
	if err != nil {
		t.Fatalf("etcdtest: restart member %d: %v", i, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcdtest: member %d: %v", i, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("etcdtest: member %d not ready 30s after its restart", i)
	}
	c.members[i], c.stopped[i] = e, false
}

// Backup copies the data directory of the stopped member i (what a
// backup of its disk holds) and returns the copy's path.
func (c *Cluster) Backup(t testing.TB, i int) string {
	t.Helper()
	if !c.stopped[i] {
		t.Fatalf("etcdtest: Backup of member %d, which runs", i)
	}
	return copyDir(t, c.cfgs[i].Dir)
}

// Restore replaces the data directory of the stopped member i with a
// copy of backup (Backup's): restarted, it has the state of the backup,
// its revision back where it was then.
func (c *Cluster) Restore(t testing.TB, i int, backup string) {
	t.Helper()
	if !c.stopped[i] {
		t.Fatalf("etcdtest: Restore of member %d, which runs", i)
	}
	c.cfgs[i].Dir = copyDir(t, backup)
}

// copyDir copies the directory from into a new one, private as etcd
// wants its data directories (0700).
func copyDir(t testing.TB, from string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(from)); err != nil {
		t.Fatalf("etcdtest: copy %s: %v", from, err)
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return os.Chmod(path, 0o700)
	})
	if err != nil {
		t.Fatalf("etcdtest: copy %s: %v", from, err)
	}
	return dir
}

// stopAll stops the running members at once, with no leadership
// transfer (the test is over).
func (c *Cluster) stopAll() {
	var wg sync.WaitGroup
	for i, e := range c.members {
		if !c.stopped[i] {
			c.stopped[i] = true
			wg.Go(func() {
				e.Server.HardStop()
				e.Close()
			})
		}
	}
	wg.Wait()
	c.closing.Wait()
}
