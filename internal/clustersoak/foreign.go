package clustersoak

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/internal/etcdtest"
)

// foreignPrefix is the keys of another user of the same etcd, outside
// probed's --etcd-prefix.
const foreignPrefix = "/foreign/"

// foreign is another client of probed's etcd: it writes its own keys
// and watches them from the revision of its first write, for the whole
// soak. probed must never break that watch (it does not compact etcd by
// default).
type foreign struct {
	cli   *clientv3.Client
	start int64 // revision of the first write

	mu      sync.Mutex // guards the fields below
	written []int64    // revisions of the acknowledged puts
	seen    []int64    // revisions the watch delivered
	broken  []string
}

func startForeign(ctx context.Context, endpoints []string) (*foreign, error) {
	cli, err := etcdtest.NewClient(endpoints...)
	if err != nil {
		return nil, err
	}
	f := &foreign{cli: cli}
	ctx2, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.Put(ctx2, foreignPrefix+"0", "0")
	if err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("foreign client: %w", err)
	}
	f.start = resp.Header.Revision
	f.written = []int64{f.start}
	return f, nil
}

// write puts a key every interval until ctx ends.
func (f *foreign) write(ctx context.Context, every time.Duration) {
	for n := 1; ; n++ {
		if sleep(ctx, every) != nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := f.cli.Put(cctx, foreignPrefix+strconv.Itoa(n%100), strconv.Itoa(n))
		cancel()
		if err == nil {
			f.mu.Lock()
			f.written = append(f.written, resp.Header.Revision)
			f.mu.Unlock()
		}
	}
}

// watch follows the prefix from the first write until ctx ends.
func (f *foreign) watch(ctx context.Context) {
	for resp := range f.cli.Watch(ctx, foreignPrefix, clientv3.WithPrefix(), clientv3.WithRev(f.start)) {
		f.mu.Lock()
		switch {
		case resp.CompactRevision != 0:
			f.broken = append(f.broken, fmt.Sprintf("compacted at etcd revision %d", resp.CompactRevision))
		case resp.Canceled || resp.Err() != nil:
			if ctx.Err() == nil {
				f.broken = append(f.broken, fmt.Sprintf("canceled: %v", resp.Err()))
			}
		}
		for _, ev := range resp.Events {
			f.seen = append(f.seen, ev.Kv.ModRevision)
		}
		f.mu.Unlock()
	}
}

// foreignResult is what the foreign client saw.
type foreignResult struct {
	Written, Seen int
	Problems      []string
}

// check waits (up to limit) until the watch has delivered every
// acknowledged put, then checks it delivered them in order, and that
// the history from the first write is still readable.
func (f *foreign) check(ctx context.Context, limit time.Duration) foreignResult {
	deadline := time.Now().Add(limit)
	for {
		f.mu.Lock()
		last, seen := f.written[len(f.written)-1], f.seen
		done := len(seen) > 0 && seen[len(seen)-1] >= last
		f.mu.Unlock()
		if done || time.Now().After(deadline) || sleep(ctx, 50*time.Millisecond) != nil {
			break
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	res := foreignResult{Written: len(f.written), Seen: len(f.seen), Problems: append([]string(nil), f.broken...)}
	got := make(map[int64]bool, len(f.seen))
	for i, rev := range f.seen {
		if i > 0 && rev <= f.seen[i-1] {
			res.Problems = append(res.Problems, fmt.Sprintf("revision %d delivered after %d", rev, f.seen[i-1]))
		}
		got[rev] = true
	}
	missing := 0
	for _, rev := range f.written {
		if !got[rev] {
			missing++
		}
	}
	if missing > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d of %d acknowledged puts never delivered by the watch", missing, len(f.written)))
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := f.cli.Get(cctx, foreignPrefix+"0", clientv3.WithRev(f.start)); err != nil {
		res.Problems = append(res.Problems, fmt.Sprintf("a read at the first write's revision %d: %v", f.start, err))
	}
	return res
}
