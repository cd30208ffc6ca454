package etcd_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/etcd"
)

// heldWatcher is a client's Watcher whose responses can be held back, as
// a watch that stalls behind etcd while the client's requests go
// through.
type heldWatcher struct {
	clientv3.Watcher
	mu   sync.Mutex
	gate chan struct{} // guarded by mu; nil: responses flow, else held until closed
}

func (w *heldWatcher) hold() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gate == nil {
		w.gate = make(chan struct{})
	}
}

func (w *heldWatcher) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gate != nil {
		close(w.gate)
		w.gate = nil
	}
}

func (w *heldWatcher) held() chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gate
}

// Watch relays the watch's responses, each once the gate is open; the
// relay ends with the watch (ctx).
func (w *heldWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	in := w.Watcher.Watch(ctx, key, opts...)
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		for resp := range in {
			if gate := w.held(); gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
					return
				}
			}
			select {
			case out <- resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// askedKV is a client's KV that tells when a spec's key is read.
type askedKV struct {
	clientv3.KV
	prefix string
	asked  chan string // the names whose spec was read
}

func (kv *askedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := kv.KV.Get(ctx, key, opts...)
	if name, ok := strings.CutPrefix(key, kv.prefix+"specs/"); ok {
		select {
		case kv.asked <- name:
		default:
		}
	}
	return resp, err
}

// TestNotFoundOnlyWhenTheStoreSaysSo: a replica whose lease holds but
// whose watch lags behind etcd never answers NotFound for a target
// another replica created: it reads etcd (linearizably) and, the target
// being there, waits for its view to catch up and answers from it — or,
// when the view does not catch up in time, fails with ErrSuspended, so the
// client can ask another replica. A name etcd does not have is NotFound
// at once.
func TestNotFoundOnlyWhenTheStoreSaysSo(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		call func(ctx context.Context, e *engine.Engine, name string) error
		// caughtUp is the call's outcome once the view has the target
		// (nil: success).
		caughtUp func(error) bool
	}{
		{
			name: "get",
			call: func(ctx context.Context, e *engine.Engine, name string) error {
				_, err := e.Get(ctx, name)
				return err
			},
			caughtUp: func(err error) bool { return err == nil },
		},
		{
			name: "delete",
			call: func(ctx context.Context, e *engine.Engine, name string) error {
				_, err := e.Delete(ctx, name)
				return err
			},
			caughtUp: func(err error) bool { var n *engine.NotOwnedError; return errors.As(err, &n) },
		},
	}
	c := etcdtest.Start(t)
	// One shard, a's.
	_, optsA := member(t, c.Client(t), "", 1, "a", 0)
	_, optsB := member(t, c.Client(t), "", 1, "b")
	a := startReplica(t, open(t, c.Client(t), optsA))
	cliB := c.Client(t)
	watcher := &heldWatcher{Watcher: cliB.Watcher}
	cliB.Watcher = watcher
	kv := &askedKV{KV: cliB.KV, prefix: etcd.DefaultPrefix, asked: make(chan string, 16)}
	cliB.KV = kv
	b := startReplica(t, open(t, cliB, optsB))
	ctx := t.Context()

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(ctx, b.eng, "a-never-"+tc.name); !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("a name etcd does not have: %v, want ErrNotFound", err)
			}

			// The view stays behind: the call fails over, not NotFound.
			watcher.hold()
			behind := "a-behind-" + tc.name
			if _, err := a.eng.Create(ctx, &target.Spec{Name: behind}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- tc.call(ctx, b.eng, behind) }()
			var err error
		wait:
			for deadline := time.After(20 * time.Second); ; {
				select {
				case err = <-done:
					break wait
				case <-deadline:
					t.Fatal("the call did not return")
				case <-time.After(10 * time.Millisecond):
					b.clock.Advance(500 * time.Millisecond) // presenceSync runs out
				}
			}
			if !errors.Is(err, engine.ErrSuspended) {
				t.Fatalf("with the view behind the store: %v, want ErrSuspended", err)
			}
			watcher.release()

			// The view catches up while the call waits: it answers from it.
			watcher.hold()
			caught := "a-caught-" + tc.name
			if _, err := a.eng.Create(ctx, &target.Spec{Name: caught}); err != nil {
				t.Fatal(err)
			}
			drain(kv.asked)
			go func() { done <- tc.call(ctx, b.eng, caught) }()
			select {
			case name := <-kv.asked:
				if name != caught {
					t.Fatalf("read the spec of %q, want %q", name, caught)
				}
			case err := <-done:
				t.Fatalf("answered %v without reading etcd", err)
			case <-time.After(20 * time.Second):
				t.Fatal("etcd was not read")
			}
			watcher.release()
			if err := <-done; !tc.caughtUp(err) {
				t.Fatalf("once caught up: %v", err)
			}
		})
	}
}

// drain empties ch.
func drain[T any](ch chan T) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
