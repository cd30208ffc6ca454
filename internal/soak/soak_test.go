// Package soak_test loads a real probed (probedtest: engine, checkers,
// store and gRPC server on loopback) through its gRPC API for a while:
// thousands of targets probing HTTP backends that flap, creates, updates
// and deletes at a steady rate, and watchers that connect, drop and
// resume. Afterwards every watcher's events must be exactly the events
// of a reference watcher (and of a full replay) for the revisions it
// covered — no gap, no duplicate, nothing out of order —, no goroutine
// may be left, and the heap must be back near where it started.
//
// `go test` runs a short version (about 15 s with -race). PROBED_SOAK=10m
// runs the load for 10 minutes; PROBED_SOAK_TARGETS sets the number of
// targets (default 2000).
package soak_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/server"
)

// config is the size of the run.
type config struct {
	duration  time.Duration // of the load phase
	targets   int           // kept registered during the load
	backends  int           // HTTP servers the targets probe
	watchers  int           // watchers connecting and dropping
	mutations int           // creates, updates and deletes per second
	groups    int           // label groups (some watchers select one)
	heapSlack uint64        // heap growth tolerated at the end
}

func soakConfig(t *testing.T) config {
	c := config{duration: 8 * time.Second, targets: 2000, backends: 20, watchers: 8, mutations: 40, groups: 4, heapSlack: 48 << 20}
	if testing.Short() {
		c.duration = 4 * time.Second
	}
	if v := os.Getenv("PROBED_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("PROBED_SOAK=%q: %v", v, err)
		}
		c.duration = d
	}
	if v := os.Getenv("PROBED_SOAK_TARGETS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PROBED_SOAK_TARGETS=%q: want a positive number", v)
		}
		c.targets = n
	}
	return c
}

func TestSoak(t *testing.T) {
	cfg := soakConfig(t)
	// Registered first, so it runs last: after the server, the backends
	// and the connections are gone.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })

	backends := startBackends(t, cfg.backends)
	s := probedtest.Start(t, probedtest.Options{
		// The history is what the engine keeps by design: small, so that
		// what remains after the run is near the baseline.
		Engine: engine.Options{History: 500_000, HistoryBytes: historyBytes, WatchBuffer: 1 << 16},
		Server: server.Options{ProgressInterval: 300 * time.Millisecond},
	})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	load(t, cfg, s, backends)
	waitUntil(t, "every watcher closed on the server", func() bool { return s.Engine.Stats().Watchers == 0 })

	// Memory is back near the baseline: the targets are gone, and the
	// history the engine keeps is bounded by HistoryBytes.
	var after runtime.MemStats
	if err := poll.Every(100*time.Millisecond).Wait("the heap back near its baseline", 10*time.Second, func() bool {
		runtime.GC()
		runtime.ReadMemStats(&after)
		return after.HeapAlloc <= before.HeapAlloc+cfg.heapSlack
	}); err != nil {
		t.Errorf("heap: %d MiB allocated after the run, %d MiB before: more than %d MiB kept",
			after.HeapAlloc>>20, before.HeapAlloc>>20, cfg.heapSlack>>20)
	}
	t.Logf("heap: %d MiB before, %d MiB after; %d goroutines", before.HeapAlloc>>20, after.HeapAlloc>>20, runtime.NumGoroutine())
}

// load runs the load phase against s and checks what every watcher saw;
// everything it allocated on the client side is garbage when it returns.
func load(t *testing.T, cfg config, s *probedtest.Server, backends []*backend) {
	conns := make([]*grpc.ClientConn, 4)
	for i := range conns {
		c, err := grpc.NewClient(s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	svc := probev1.NewProbeServiceClient(conns[0])
	ctx := t.Context()

	// The reference watcher sees every event from the start.
	refCtx, stopRef := context.WithCancel(ctx)
	defer stopRef()
	ref := newRecorder(probev1.NewProbeServiceClient(conns[1]), nil)
	refDone := make(chan error, 1)
	go func() { refDone <- ref.follow(refCtx) }()
	ref.waitFor(t, 0)

	w := &world{cfg: cfg, svc: svc, backends: backends}
	start := time.Now()
	w.createInitial(t, ctx)
	t.Logf("%d targets created in %v", cfg.targets, time.Since(start).Round(time.Millisecond))

	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.duration)
	defer stopLoad()
	var wg sync.WaitGroup
	wg.Go(func() { w.flap(loadCtx) })
	wg.Go(func() { w.mutate(t, loadCtx, ctx) })
	churners := make([]*churner, cfg.watchers)
	for i := range churners {
		var sel map[string]string
		if i%2 == 1 {
			sel = map[string]string{"group": strconv.Itoa(i % cfg.groups)}
		}
		churners[i] = &churner{id: i, svc: probev1.NewProbeServiceClient(conns[i%len(conns)]), sel: sel, rng: rand.New(rand.NewPCG(uint64(i), 42))}
		wg.Go(func() { churners[i].run(loadCtx, ref) })
	}
	<-loadCtx.Done()
	wg.Wait()
	t.Logf("load phase %v: %d mutations, %d flaps, revision %d", cfg.duration, w.mutations.Load(), w.flaps.Load(), s.Engine.Revision())

	// Remove everything; then the reference must hold every revision.
	w.deleteAll(t, ctx)
	if err := poll.Wait("every target deleted", 60*time.Second, func() bool { return s.Engine.Stats().Targets == 0 }); err != nil {
		resp, lerr := svc.ListTargets(ctx, &probev1.ListTargetsRequest{PageSize: 5})
		for _, tg := range resp.GetTargets() {
			t.Logf("left: %s %v revision %d", tg.GetName(), tg.GetStatus().GetPhase(), tg.GetStatus().GetRevision())
		}
		t.Fatalf("%v: %d targets left (list: %v)", err, s.Engine.Stats().Targets, lerr)
	}
	end := s.Engine.Revision()
	ref.waitFor(t, end)
	stopRef()
	if err := <-refDone; status.Code(err) != codes.Canceled {
		t.Errorf("reference watcher ended with %v, want Canceled", err)
	}

	// Every watcher's events are exactly the reference's.
	segments := 0
	for _, c := range churners {
		segments += len(c.segments)
		for _, seg := range c.segments {
			if err := ref.verify(seg, c.sel, cfg.groups); err != nil {
				t.Errorf("watcher %d: %v", c.id, err)
			}
		}
	}
	t.Logf("%d watch segments checked against %d reference events (revision %d)", segments, len(ref.events), end)

	// And so is a full replay of the retained history.
	replay := newRecorder(svc, nil)
	if err := replay.replay(ctx, 1, end); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if err := ref.verify(replay.seg, nil, cfg.groups); err != nil {
		t.Errorf("full replay: %v", err)
	}
	t.Logf("replay of the retained history (from revision %d) checked", replay.seg.since)
}

// startBackends starts n HTTP servers whose /healthz is healthy or not.
func startBackends(t *testing.T, n int) []*backend {
	t.Helper()
	bs := make([]*backend, n)
	for i := range bs {
		b := &backend{}
		b.healthy.Store(true)
		b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if b.healthy.Load() {
				w.WriteHeader(http.StatusOK)
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		t.Cleanup(b.srv.Close)
		_, p, _ := net.SplitHostPort(b.srv.Listener.Addr().String())
		port, _ := strconv.Atoi(p)
		b.port = int32(port)
		bs[i] = b
	}
	return bs
}

type backend struct {
	srv     *httptest.Server
	port    int32
	healthy atomic.Bool
}

// world drives the targets: creates, updates, deletes and flapping.
type world struct {
	cfg      config
	svc      probev1.ProbeServiceClient
	backends []*backend

	mu   sync.Mutex // guards live
	live []int      // ids of registered targets (while no mutator runs)

	mutations, flaps atomic.Int64
}

// historyBytes is the engine's history bound (its estimate of the
// events' size): the short run stays below it, long ones compact.
const historyBytes = 8 << 20

// period is the targets' probe period, in seconds: 2000 targets are 400
// probes a second.
const period = 5

func name(id int) string { return fmt.Sprintf("t-%06d", id) }

// group is the label group of a target, from its name.
func group(target string, groups int) string {
	id, _ := strconv.Atoi(target[len("t-"):])
	return strconv.Itoa(id % groups)
}

func (w *world) spec(id int, version string) *probev1.Target {
	b := w.backends[id%len(w.backends)]
	return &probev1.Target{
		Name:   name(id),
		Labels: map[string]string{"group": strconv.Itoa(id % w.cfg.groups), "version": version},
		ReadinessProbe: &probev1.Probe{
			// A connection per probe: thousands of kept-alive ones would be
			// thousands of goroutines, near the race detector's limit.
			Handler:          &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "127.0.0.1", Port: b.port, Path: "/healthz", DisableKeepAlive: true}},
			PeriodSeconds:    period,
			FailureThreshold: 1,
		},
	}
}

func (w *world) createInitial(t *testing.T, ctx context.Context) {
	ids := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for id := range ids {
				if _, err := w.svc.CreateTarget(ctx, &probev1.CreateTargetRequest{Target: w.spec(id, "0")}); err != nil {
					t.Errorf("create %s: %v", name(id), err)
				}
			}
		})
	}
	for id := range w.cfg.targets {
		ids <- id
	}
	close(ids)
	wg.Wait()
	w.live = make([]int, w.cfg.targets)
	for i := range w.live {
		w.live[i] = i
	}
}

// flap turns a random backend healthy or unhealthy every 500ms.
func (w *world) flap(ctx context.Context) {
	rng := rand.New(rand.NewPCG(1, 2))
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b := w.backends[rng.IntN(len(w.backends))]
		b.healthy.Store(!b.healthy.Load())
		w.flaps.Add(1)
	}
}

// mutators is how many goroutines mutate at once: each owns the ids
// equal to its number modulo mutators, so none races another on a target.
const mutators = 4

// mutate creates, updates or deletes a target at a steady rate, keeping
// the number of targets about constant, until stop is done. Calls use
// ctx: one in flight when stop ends completes.
func (w *world) mutate(t *testing.T, stop, ctx context.Context) {
	var wg sync.WaitGroup
	ticks := make(chan struct{})
	w.mu.Lock()
	parts := make([][]int, mutators)
	for _, id := range w.live {
		parts[id%mutators] = append(parts[id%mutators], id)
	}
	w.live = nil
	w.mu.Unlock()
	for k := range mutators {
		wg.Go(func() {
			live := w.mutator(t, ctx, k, parts[k], ticks)
			w.mu.Lock()
			w.live = append(w.live, live...)
			w.mu.Unlock()
		})
	}
	tick := time.NewTicker(time.Second / time.Duration(w.cfg.mutations))
	defer tick.Stop()
	defer wg.Wait()
	defer close(ticks)
	for {
		select {
		case <-stop.Done():
			return
		case <-tick.C:
		}
		select {
		case ticks <- struct{}{}:
		default: // every mutator busy: this tick is skipped
		}
	}
}

// mutator k makes one change per tick to its targets (live) and returns
// them when ticks is closed.
func (w *world) mutator(t *testing.T, ctx context.Context, k int, live []int, ticks <-chan struct{}) []int {
	rng := rand.New(rand.NewPCG(3, uint64(k)))
	// New ids: ≡ k modulo mutators, beyond the initial ones.
	next := w.cfg.targets - w.cfg.targets%mutators + k
	if next < w.cfg.targets {
		next += mutators
	}
	for version := 1; ; version++ {
		if _, ok := <-ticks; !ok {
			return live
		}
		op := rng.IntN(3)
		if len(live) == 0 {
			op = 0
		}
		var (
			id  int
			err error
		)
		switch op {
		case 0:
			id, next = next, next+mutators
			live = append(live, id)
			_, err = w.svc.CreateTarget(ctx, &probev1.CreateTargetRequest{Target: w.spec(id, "0")})
		case 1:
			id = live[rng.IntN(len(live))]
			_, err = w.svc.UpdateTarget(ctx, &probev1.UpdateTargetRequest{Target: w.spec(id, strconv.Itoa(version))})
		case 2:
			i := rng.IntN(len(live))
			id = live[i]
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			_, err = w.svc.DeleteTarget(ctx, &probev1.DeleteTargetRequest{Name: name(id)})
			if status.Code(err) == codes.NotFound {
				err = nil // removed before DeleteTarget read it back
			}
		}
		if err != nil {
			t.Errorf("mutation %d of %s: %v", op, name(id), err)
		}
		w.mutations.Add(1)
	}
}

func (w *world) deleteAll(t *testing.T, ctx context.Context) {
	ids := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for id := range ids {
				_, err := w.svc.DeleteTarget(ctx, &probev1.DeleteTargetRequest{Name: name(id)})
				if err != nil && status.Code(err) != codes.NotFound {
					t.Errorf("delete %s: %v", name(id), err)
				}
			}
		})
	}
	for _, id := range w.live {
		ids <- id
	}
	close(ids)
	wg.Wait()
}

// event is what a watcher saw of one event: enough to compare exactly.
type event struct {
	rev  uint64
	name string
	kind probev1.EventKind
	sum  uint64 // FNV-1a of the event's deterministic encoding
}

func keyOf(ev *probev1.Event) event {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
	if err != nil {
		panic(err)
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return event{rev: ev.GetRevision(), name: ev.GetName(), kind: ev.GetKind(), sum: h.Sum64()}
}

// segment is one Watch stream as a client saw it: it covers the
// revisions (start, end] — every event in that range matching the
// selector was delivered, in order.
type segment struct {
	since    uint64 // requested
	snapshot bool   // started with a snapshot (since 0)
	partial  bool   // ended before its snapshot was complete: covers nothing
	snapRev  uint64 // the snapshot's revision
	names    []string
	start    uint64
	end      uint64
	events   []event
}

// recorder follows a Watch and records what it delivers.
type recorder struct {
	svc probev1.ProbeServiceClient
	sel map[string]string

	mu     sync.Mutex // guards the fields below
	seg    segment
	events []event
	rev    uint64 // last revision covered
	synced bool   // the snapshot is complete
}

func newRecorder(svc probev1.ProbeServiceClient, sel map[string]string) *recorder {
	return &recorder{svc: svc, sel: sel}
}

// follow records one stream from a snapshot until ctx ends.
func (r *recorder) follow(ctx context.Context) error {
	seg, err := stream(ctx, r.svc, 0, r.sel, func(seg *segment) {
		r.mu.Lock()
		r.events = seg.events
		r.rev = seg.end
		r.synced = seg.snapshot && !seg.partial
		r.mu.Unlock()
	})
	r.mu.Lock()
	r.seg = seg
	r.events = seg.events
	r.mu.Unlock()
	return err
}

// waitFor waits until the recorder covered rev.
func (r *recorder) waitFor(t *testing.T, rev uint64) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("the reference watcher at revision %d", rev), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.synced && r.rev >= rev
	})
}

// replay records a stream from since until it covered end.
func (r *recorder) replay(ctx context.Context, since, end uint64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seg, err := stream(ctx, r.svc, since, r.sel, func(seg *segment) {
		if seg.end >= end {
			cancel()
		}
	})
	if status.Code(err) == codes.OutOfRange {
		// Long runs outlive the retained history: replay what is left.
		oldest := oldestRevision(err)
		if oldest == 0 {
			return err
		}
		return r.replay(ctx, oldest, end)
	}
	r.seg = seg
	if seg.end < end {
		return fmt.Errorf("replay ended at %d before %d: %w", seg.end, end, err)
	}
	return nil
}

func oldestRevision(err error) uint64 {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			n, _ := strconv.ParseUint(info.GetMetadata()["oldest_revision"], 10, 64)
			return n
		}
	}
	return 0
}

// stream runs one Watch from since and returns what it covered; after
// each message it calls progress with the segment so far.
func stream(ctx context.Context, svc probev1.ProbeServiceClient, since uint64, sel map[string]string, progress func(*segment)) (segment, error) {
	seg := segment{since: since, snapshot: since == 0}
	if since > 0 {
		seg.start, seg.end = since-1, since-1
	}
	// A snapshot stream covers nothing until its snapshot is complete,
	// including one that fails to start.
	seg.partial = seg.snapshot
	s, err := svc.Watch(ctx, &probev1.WatchRequest{SinceRevision: since, LabelSelector: sel})
	if err != nil {
		return seg, err
	}
	for {
		resp, err := s.Recv()
		if err != nil {
			return seg, err
		}
		if resp.GetSnapshot() {
			for _, ev := range resp.GetEvents() {
				seg.names = append(seg.names, ev.GetName())
			}
			if resp.GetSnapshotComplete() {
				seg.partial = false
				seg.snapRev = resp.GetRevision()
				seg.start, seg.end = seg.snapRev, seg.snapRev
			}
			progress(&seg)
			continue
		}
		for _, ev := range resp.GetEvents() {
			seg.events = append(seg.events, keyOf(ev))
			// A batch's revision may lag its last event (published
			// while the batch was taken): both are covered.
			seg.end = max(seg.end, ev.GetRevision())
		}
		seg.end = max(seg.end, resp.GetRevision())
		progress(&seg)
	}
}

// verify checks that seg delivered exactly the reference's events in
// (seg.start, seg.end] that match sel, in order, and that its snapshot
// held exactly the targets alive at its revision.
func (r *recorder) verify(seg segment, sel map[string]string, groups int) error {
	if seg.partial {
		return nil
	}
	match := func(name string) bool { return sel == nil || group(name, groups) == sel["group"] }
	var want []event
	alive := make(map[string]bool)
	for _, ev := range r.events {
		if ev.rev <= seg.start {
			switch ev.kind {
			case probev1.EventKind_EVENT_KIND_CREATED:
				alive[ev.name] = true
			case probev1.EventKind_EVENT_KIND_DELETED:
				delete(alive, ev.name)
			}
			continue
		}
		if ev.rev > seg.end {
			break
		}
		if match(ev.name) {
			want = append(want, ev)
		}
	}
	for i := 1; i < len(seg.events); i++ {
		if seg.events[i].rev <= seg.events[i-1].rev {
			return fmt.Errorf("segment from %d: revision %d after %d", seg.since, seg.events[i].rev, seg.events[i-1].rev)
		}
	}
	if len(seg.events) > 0 && (seg.events[0].rev <= seg.start || seg.events[len(seg.events)-1].rev > seg.end) {
		return fmt.Errorf("segment (%d, %d] holds revisions %d to %d", seg.start, seg.end, seg.events[0].rev, seg.events[len(seg.events)-1].rev)
	}
	if !slices.Equal(want, seg.events) {
		return fmt.Errorf("segment (%d, %d]: %d events, the reference has %d; first difference at %v", seg.start, seg.end, len(seg.events), len(want), firstDiff(want, seg.events))
	}
	if seg.snapshot {
		var wantNames []string
		for n := range alive {
			if match(n) {
				wantNames = append(wantNames, n)
			}
		}
		slices.Sort(wantNames)
		if !slices.Equal(wantNames, seg.names) {
			return fmt.Errorf("snapshot at %d: %d targets, the reference had %d alive", seg.snapRev, len(seg.names), len(wantNames))
		}
	}
	return nil
}

func firstDiff(want, got []event) string {
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			return fmt.Sprintf("index %d: want %+v, got %+v", i, want[i], got[i])
		}
	}
	return fmt.Sprintf("index %d", min(len(want), len(got)))
}

// churner is a watcher that keeps dropping its stream and resuming it
// where it was, sometimes starting over with a snapshot or from an older
// revision.
type churner struct {
	id       int
	svc      probev1.ProbeServiceClient
	sel      map[string]string
	rng      *rand.Rand
	segments []segment
}

func (c *churner) run(ctx context.Context, ref *recorder) {
	var since uint64
	for ctx.Err() == nil {
		d := time.Duration(100+c.rng.IntN(1500)) * time.Millisecond
		sctx, cancel := context.WithTimeout(ctx, d)
		seg, err := stream(sctx, c.svc, since, c.sel, func(*segment) {})
		cancel()
		c.segments = append(c.segments, seg)
		if status.Code(err) == codes.OutOfRange {
			since = 0 // compacted (long runs): start over
			continue
		}
		// Otherwise the stream was dropped by us (DeadlineExceeded,
		// Canceled) or by the server as too slow (ResourceExhausted):
		// resume.
		switch r := c.rng.IntN(10); {
		case r == 0 || seg.partial:
			since = 0 // start over with a snapshot
		case r == 1:
			ref.mu.Lock()
			since = 1 + uint64(c.rng.Int64N(int64(ref.rev)+1)) // an older revision: replay from history
			ref.mu.Unlock()
		default:
			since = seg.end + 1 // resume
		}
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, 60*time.Second, cond)
}
