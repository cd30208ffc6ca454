package engine_test

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

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/store/memory"
)

// t0 is the fake clock's start: creation times in tests are t0.
var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// harness runs a real engine (real checkers, memory store) on a fake clock
// with one wheel shard, and a watcher that sees every event.
type harness struct {
	t      *testing.T
	clock  *clockwork.FakeClock
	store  *memory.Store
	eng    *engine.Engine
	opts   engine.Options
	cancel context.CancelFunc
	done   chan error
	events chan engine.Event
	// hanging counts requests held by hanging backends right now.
	hanging atomic.Int64
	// watcher sees every event; forwarding counts the events Next returned
	// that the goroutine feeding events has not sent yet.
	watcher    *engine.Watcher
	forwarding *atomic.Int64
	// watching tracks the goroutine that feeds events; stop waits for it.
	watching sync.WaitGroup
}

func newHarness(t *testing.T, mod ...func(*engine.Options)) *harness {
	t.Helper()
	// Revisions step by 3: the engine must not assume they are contiguous.
	h := &harness{t: t, clock: clockwork.NewFakeClockAt(t0), store: memory.New(3)}
	h.opts = engine.Options{
		Clock:    h.clock,
		Store:    h.store,
		Checkers: check.New(check.Options{AllowExec: true}),
		Shards:   1,
	}
	for _, m := range mod {
		m(&h.opts)
	}
	h.start()
	t.Cleanup(h.stop)
	return h
}

// start opens and runs an engine over h.store.
func (h *harness) start() {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	eng, err := engine.Open(ctx, h.opts)
	if err != nil {
		cancel()
		h.t.Fatalf("Open: %v", err)
	}
	// The goroutines below use locals, never h's fields: a restart
	// replaces those while the previous goroutines are still finishing.
	done, events := make(chan error, 1), make(chan engine.Event, 1<<16)
	h.eng, h.cancel, h.done, h.events = eng, cancel, done, events
	go func() { done <- eng.Run(ctx) }()
	w, err := eng.Watch(ctx, engine.WatchOptions{Since: eng.Revision() + 1, Buffer: 1 << 20})
	if err != nil {
		h.t.Fatalf("Watch: %v", err)
	}
	forwarding := new(atomic.Int64)
	h.watcher, h.forwarding = w, forwarding
	h.watching.Add(1)
	go func() {
		defer h.watching.Done()
		defer w.Close()
		for {
			b, err := w.Next(ctx)
			if err != nil {
				return
			}
			forwarding.Add(int64(len(b.Events)))
			for _, ev := range b.Events {
				select {
				case events <- ev:
					forwarding.Add(-1)
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	h.quiesce()
}

// stop stops the engine and waits for Run to return.
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		h.t.Errorf("Run did not return within 10s of cancel")
	}
	h.watching.Wait()
	h.cancel = nil
}

// restart stops the engine and starts a new one over the same store, as a
// process restart would.
func (h *harness) restart() {
	h.t.Helper()
	h.stop()
	h.start()
}

// idleWaiters is what waits on the fake clock: the one wheel shard's
// timer (probe timeouts are wheel timers), the history compaction ticker
// and the probe goroutine pool's resize ticker.
const idleWaiters = 3

// quiesce waits until everything the last clock move started is finished:
// the wheel has dispatched what was due and parked again, no cancelled run
// is still ending, every probe still running is one hanging in a backend
// (waiting for its timeout on the fake clock), and (over the harness's own
// store) every transition submitted is written and published.
func (h *harness) quiesce() {
	h.t.Helper()
	poll.UntilMet(h.t, "the engine to settle", 10*time.Second, func() string {
		// A cancelled run leaves Cancelling last, once it is no longer in
		// flight: with Cancelling 0 no cancelled run is still ending.
		st := h.eng.Stats()
		if st.Cancelling == 0 && st.Inflight == h.hanging.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			err := h.clock.BlockUntilContext(ctx, idleWaiters)
			cancel()
			if st = h.eng.Stats(); err == nil && st.Cancelling == 0 && st.Inflight == h.hanging.Load() {
				// A run that ended has submitted its transition; it is
				// visible (Get, events) once written and published. Over
				// a store with faults armed the test holds or refuses
				// writes on purpose and waits for them itself.
				if !h.flushable() {
					return ""
				}
				fctx, cancel := context.WithTimeout(context.Background(), time.Second)
				err := h.eng.Flush(fctx)
				cancel()
				if err != nil {
					return "the committer to publish what was submitted: " + err.Error()
				}
				return ""
			}
		}
		return fmt.Sprintf("%d probes in flight (%d cancelled), %d hanging in backends", st.Inflight, st.Cancelling, h.hanging.Load())
	})
}

// flushable reports whether quiesce may wait for the committer: over the
// harness's own store always, over a test store that injects faults
// (faultStore) only while none is armed or in progress.
func (h *harness) flushable() bool {
	if h.opts.Store == engine.Store(h.store) {
		return true
	}
	fs, ok := h.opts.Store.(interface{ flushable() bool })
	return ok && fs.flushable()
}

// advance moves the fake clock in steps of step up to d and quiesces after
// each, so everything due at a time runs at exactly that time.
func (h *harness) advance(d, step time.Duration) {
	h.t.Helper()
	for moved := time.Duration(0); moved < d; moved += step {
		h.clock.Advance(min(step, d-moved))
		h.quiesce()
	}
}

// create registers spec and fails the test on error.
func (h *harness) create(spec *target.Spec) *engine.Target {
	h.t.Helper()
	tg, err := h.eng.Create(context.Background(), spec)
	if err != nil {
		h.t.Fatalf("Create(%s): %v", spec.Name, err)
	}
	h.quiesce()
	return tg
}

func (h *harness) get(name string) *engine.Target {
	h.t.Helper()
	tg, err := h.eng.Get(context.Background(), name)
	if err != nil {
		h.t.Fatalf("Get(%s): %v", name, err)
	}
	return tg
}

// next returns the next event of one of kinds (others are skipped).
func (h *harness) next(kinds ...engine.EventKind) engine.Event {
	h.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-h.events:
			if len(kinds) == 0 {
				return ev
			}
			for _, k := range kinds {
				if ev.Kind == k {
					return ev
				}
			}
		case <-timeout:
			h.t.Fatalf("no %v event within 10s", kinds)
			return engine.Event{}
		}
	}
}

// nextAll waits for one event of each of kinds, in any order (others are
// skipped).
func (h *harness) nextAll(kinds ...engine.EventKind) {
	h.t.Helper()
	want := make(map[engine.EventKind]bool)
	for _, k := range kinds {
		want[k] = true
	}
	for len(want) > 0 {
		var ks []engine.EventKind
		for k := range want {
			ks = append(ks, k)
		}
		delete(want, h.next(ks...).Kind)
	}
}

// noEvent asserts no event of kinds is pending (call after quiesce; the
// committer publishes asynchronously, so this first waits for it).
func (h *harness) noEvent(kinds ...engine.EventKind) {
	h.t.Helper()
	h.flush()
	for {
		select {
		case ev := <-h.events:
			for _, k := range kinds {
				if ev.Kind == k {
					h.t.Fatalf("unexpected %v event: %+v", ev.Kind, ev)
				}
			}
		default:
			return
		}
	}
}

// flush waits until every change submitted so far is published (the
// committer's barrier: Flush, export_test.go) and every event published
// is in h.events (the watcher's queue is empty and the goroutine feeding
// events has sent what it took). Not the revision: a position that only
// changes ownership (memory.Shared's Assign) publishes no event, and no
// watcher batch says it reached it.
func (h *harness) flush() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.eng.Flush(ctx); err != nil {
		h.t.Fatalf("flush: %v", err)
	}
	poll.Until(h.t, "the watcher to hand every published event over", 10*time.Second, func() bool {
		return h.watcher.Pending() == 0 && h.forwarding.Load() == 0
	})
}

// backend is a real HTTP server whose /healthz answers with a status the
// test sets.
type backend struct {
	h      *harness
	srv    *httptest.Server
	status atomic.Int32
	hits   atomic.Int64
	hang   atomic.Bool
	quit   chan struct{} // closed when the test ends: hanging handlers return
}

func (h *harness) newBackend(status int) *backend {
	t := h.t
	t.Helper()
	b := &backend{h: h, quit: make(chan struct{})}
	b.status.Store(int32(status))
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		if b.hang.Load() {
			h.hanging.Add(1)
			select {
			case <-r.Context().Done():
			case <-b.quit:
			}
			h.hanging.Add(-1)
			return
		}
		w.WriteHeader(int(b.status.Load()))
	}))
	t.Cleanup(func() {
		close(b.quit)
		b.srv.Close()
	})
	return b
}

func (b *backend) set(status int) { b.status.Store(int32(status)) }

func (b *backend) hostPort() (string, int32) {
	host, port, _ := net.SplitHostPort(b.srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return host, int32(p)
}

// httpProbe returns a probe of b with the given period (seconds + ms).
func (b *backend) probe(periodSeconds int32, periodMs int32) *probe.Spec {
	host, port := b.hostPort()
	p := &probe.Spec{
		Handler:       probe.Handler{HTTPGet: &probe.HTTPGet{Host: host, Port: port, Path: "/healthz"}},
		PeriodSeconds: periodSeconds,
	}
	if periodMs != 0 {
		p.PeriodMilliseconds = ptr(periodMs)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// probeTimes advances the clock by d in steps and returns the fake times
// at which probe typ of name ran.
func (h *harness) probeTimes(name string, typ probe.Type, d, step time.Duration) []time.Duration {
	h.t.Helper()
	var times []time.Duration
	last := h.get(name).Status.Probes[typ].ProbesTotal
	for moved := time.Duration(0); moved < d; moved += step {
		h.clock.Advance(step)
		h.quiesce()
		ps := h.get(name).Status.Probes[typ]
		if ps.ProbesTotal != last {
			if ps.ProbesTotal != last+1 {
				h.t.Fatalf("%d probes at once at %v", ps.ProbesTotal-last, h.clock.Now().Sub(t0))
			}
			last = ps.ProbesTotal
			times = append(times, ps.LastProbeTime.Sub(t0))
		}
	}
	return times
}

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}
