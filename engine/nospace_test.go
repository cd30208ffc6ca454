package engine_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/fullfs"
	"github.com/probed/probed/store/bolt"
)

// TestStoreWithoutSpace runs the engine over a bbolt store on a real
// filesystem that fills up (a tmpfs). The create whose write fails is
// held, not failed and not published; StoreError and OnStoreError say
// why; later creates and updates are refused with ErrUnavailable at once.
// The held write is retried on the engine's clock, 50 ms after the
// failure, then 100 ms after the next; once space is freed a retry
// succeeds: the held create is acknowledged, OnStoreError is told nil,
// creates are accepted again, and a restart finds what was acknowledged
// and nothing that was refused.
func TestStoreWithoutSpace(t *testing.T) {
	fs := fullfs.Mount(t, 2<<20)
	store, err := bolt.Open(filepath.Join(fs.Dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	var mu sync.Mutex
	var told []error // OnStoreError's calls; guarded by mu
	// failed and recovered are told when the store stops writing and when
	// it writes again.
	failed, recovered := make(chan struct{}, 1), make(chan struct{}, 1)
	h := newHarness(t, func(o *engine.Options) {
		o.Store = store
		o.OnStoreError = func(err error) {
			mu.Lock()
			told = append(told, err)
			mu.Unlock()
			tell := recovered
			if err != nil {
				tell = failed
			}
			select {
			case tell <- struct{}{}:
			default:
			}
		}
	})
	ctx := context.Background()
	spec := func(name string) *target.Spec {
		labels := map[string]string{}
		for i := range 60 {
			labels[fmt.Sprintf("padding-%02d", i)] = strings.Repeat("x", 63)
		}
		return &target.Spec{Name: name, Labels: labels}
	}
	h.create(spec("before"))

	fs.Fill(t)
	var held <-chan error
	heldName := ""
	for i := 0; i < 1000 && held == nil; i++ {
		name := fmt.Sprintf("full-%d", i)
		done := make(chan error, 1)
		go func() {
			_, err := h.eng.Create(ctx, spec(name))
			done <- err
		}()
		// Written (the disk still had room), or held: the store failed and
		// OnStoreError was told.
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Create(%s) on a full disk = %v, want it written or held", name, err)
			}
		case <-failed:
			held, heldName = done, name
		}
	}
	if held == nil {
		t.Fatal("1000 creates written on a full disk")
	}
	storeErr := h.eng.StoreError()
	if !errors.Is(storeErr, engine.ErrUnavailable) || !strings.Contains(storeErr.Error(), "no space") {
		t.Fatalf("StoreError() = %v, want ErrUnavailable saying no space", storeErr)
	}
	if _, err := h.eng.Get(ctx, heldName); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Get(%s) of the held create = %v, want NotFound: nothing is visible before it is durable", heldName, err)
	}
	// The refusal starts with its cause, naming the data dir.
	cause := "no space left on the device of the data dir " + filepath.Join(fs.Dir, "data")
	if _, err := h.eng.Create(ctx, spec("refused")); !errors.Is(err, engine.ErrUnavailable) || !strings.HasPrefix(err.Error(), cause) {
		t.Errorf("Create on a full disk = %v, want ErrUnavailable starting %q", err, cause)
	}
	if _, err := h.eng.Update(ctx, spec("before")); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("Update on a full disk = %v, want ErrUnavailable", err)
	}

	// The retries: 50 ms after the failure, then 100 ms after the next.
	const waiters = idleWaiters + 1 // and the committer's retry timer
	failures := func() uint64 { return h.eng.Stats().StoreUnavailable }
	// waitFailures waits for the retry the clock just fired: the committer
	// counts its failure, then arms the next retry (a waiter again).
	waitFailures := func(want uint64) {
		t.Helper()
		if err := h.clock.BlockUntilContext(t.Context(), waiters); err != nil {
			t.Fatal(err)
		}
		if got := failures(); got != want {
			t.Fatalf("%d failed commits after the retry, want %d", got, want)
		}
	}
	if got := failures(); got != 1 {
		t.Fatalf("Stats().StoreUnavailable = %d after the first failure, want 1", got)
	}
	for i, delay := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond} {
		if err := h.clock.BlockUntilContext(t.Context(), waiters); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(delay - time.Millisecond)
		if err := h.clock.BlockUntilContext(t.Context(), waiters); err != nil {
			t.Fatal(err)
		}
		if got, want := failures(), uint64(i+1); got != want {
			t.Fatalf("%d failed commits %v into a back-off of %v, want %d", got, delay-time.Millisecond, delay, want)
		}
		h.clock.Advance(time.Millisecond)
		waitFailures(uint64(i + 2))
	}

	fs.Free(t)
	// The next retry, at most maxHoldRetry (2 s) away, writes.
	if err := h.clock.BlockUntilContext(t.Context(), waiters); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2 * time.Second)
	select {
	case <-recovered:
	case <-t.Context().Done():
		t.Fatal("the store never wrote again after space was freed")
	}
	if err := h.eng.StoreError(); err != nil {
		t.Fatalf("StoreError() = %v once the store wrote again, want nil", err)
	}
	if err := <-held; err != nil {
		t.Fatalf("the held Create(%s) = %v, want it written once space returned", heldName, err)
	}
	mu.Lock()
	got := told
	mu.Unlock()
	if len(got) != 2 || !errors.Is(got[0], engine.ErrUnavailable) || got[1] != nil {
		t.Errorf("OnStoreError calls = %v, want the store's error, then nil", got)
	}
	h.create(spec("after"))

	h.restart()
	for _, name := range []string{"before", heldName, "after"} {
		if _, err := h.eng.Get(ctx, name); err != nil {
			t.Errorf("after a restart Get(%s) = %v", name, err)
		}
	}
	if _, err := h.eng.Get(ctx, "refused"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("after a restart Get(refused) = %v, want NotFound", err)
	}
}

// TestHeldWriteLostToShutdown: a create held because the disk is full,
// whose retries a shutdown ends (the store closed under them), is answered
// with an error wrapping ErrClosed — probed is shutting down, the client
// may retry — not with the store's own "closed" error, which the server
// can only report as an internal error.
func TestHeldWriteLostToShutdown(t *testing.T) {
	fs := fullfs.Mount(t, 2<<20)
	store, err := bolt.Open(filepath.Join(fs.Dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	clock := clockwork.NewFakeClockAt(t0)
	failed := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	eng, err := engine.Open(ctx, engine.Options{
		Clock: clock, Store: store, Checkers: check.New(check.Options{}), Shards: 1,
		OnStoreError: func(err error) {
			if err != nil {
				select {
				case failed <- struct{}{}:
				default:
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- eng.Run(ctx) }()
	labels := map[string]string{}
	for i := range 60 {
		labels[fmt.Sprintf("padding-%02d", i)] = strings.Repeat("x", 63)
	}
	fs.Fill(t)
	var held <-chan error
	for i := 0; i < 1000 && held == nil; i++ {
		done := make(chan error, 1)
		go func() {
			_, err := eng.Create(context.Background(), &target.Spec{Name: fmt.Sprintf("full-%d", i), Labels: labels})
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Create on a full disk = %v, want it written or held", err)
			}
		case <-failed:
			held = done
		}
	}
	if held == nil {
		t.Fatal("1000 creates written on a full disk")
	}

	cancel() // shutdown: the committer flushes, retrying the held create
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case err := <-held:
			if !errors.Is(err, engine.ErrClosed) {
				t.Fatalf("the held create after a shutdown = %v, want an error wrapping ErrClosed", err)
			}
			<-ran // its error is the store's: the engine stopped with a write it could not make
			return
		case <-time.After(10 * time.Millisecond):
			clock.Advance(500 * time.Millisecond) // the next retry
		case <-t.Context().Done():
			t.Fatal("the held create never returned")
		}
	}
}
