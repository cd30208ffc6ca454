package etcdtest

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// shared is the test binary's shared etcd (Shared).
var shared struct {
	mu   sync.Mutex
	e    *embed.Etcd
	dir  string
	err  error
	seq  atomic.Uint64 // prefixes handed out
	done bool
}

// Shared returns the single-member etcd the tests of this binary share,
// started by the first call (about a second); it fails t when etcd cannot
// start. Tests keep apart by key prefix (SharedPrefix). A package that
// uses it stops it with StopShared in its TestMain, after m.Run: the
// member's goroutines end there, not with a test.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.done {
		t.Fatal("etcdtest: Shared after StopShared")
	}
	if shared.e == nil && shared.err == nil {
		shared.e, shared.dir, shared.err = startShared()
	}
	if shared.err != nil {
		t.Fatalf("etcdtest: shared member: %v", shared.err)
	}
	// stopped is never set: Stop and Kill are not for a shared member.
	return &Cluster{members: []*embed.Etcd{shared.e}, stopped: []bool{false}}
}

// SharedPrefix returns a key prefix no other test of the binary has, for
// a test's keys in the shared etcd: "/<test name>/<n>/".
func SharedPrefix(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/%s/%d/", name, shared.seq.Add(1))
}

// StopShared stops the shared etcd, if it was started, and removes its
// data.
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.done = true
	if shared.e == nil {
		return
	}
	shared.e.Server.HardStop()
	shared.e.Close()
	_ = os.RemoveAll(shared.dir)
	shared.e = nil
}

func startShared() (*embed.Etcd, string, error) {
	dir, err := os.MkdirTemp("", "etcdtest-shared-")
	if err != nil {
		return nil, "", err
	}
	cfg := embed.NewConfig()
	cfg.Name = "shared"
	cfg.Dir = dir
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = "error"
	// One member never dials its peer URL: a port the kernel picks will do.
	client, peer := url.URL{Scheme: "http", Host: "127.0.0.1:0"}, url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, dir, nil
	case err := <-e.Err():
		e.Close()
		_ = os.RemoveAll(dir)
		return nil, "", err
	case <-time.After(30 * time.Second):
		e.Close()
		_ = os.RemoveAll(dir)
		return nil, "", fmt.Errorf("not ready after 30s")
	}
}
