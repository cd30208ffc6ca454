package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/client"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedproc"
	"github.com/probed/probed/internal/refused"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/store/bolt"
)

// The crash test runs probed as a separate process (the real binary, built
// from this package over a real bbolt data dir), registers 1,000 targets
// through the Go client, follows it with watchers, and kills it with
// SIGKILL at random points while targets flip and are created and
// deleted. After each kill it reads the data file itself, and after each
// restart it checks what README.md's "Durability" section promises.
const (
	crashTargets  = 1000
	crashFlipping = 40 // t-0000..t-0039: backends flip between 200 and 503
	crashDown     = 50 // t-0040..t-0089: backends answer 503; the rest 200
	crashChurn    = "c-"
	// crashHistory is the child's --history: replays start at the oldest
	// retained revision, so they cost the same at every kill.
	crashHistory = 8000
)

// buildProbed builds this package's probed into a temporary dir of the
// test (probedproc.Build: without the race detector, it is the process
// under test, not the test) and returns its path. The build cache makes a
// second build only a link.
func buildProbed(t *testing.T) string {
	t.Helper()
	var out bytes.Buffer
	bin, err := probedproc.Build(t.Context(), t.TempDir(), &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.Bytes())
	}
	return bin
}

// TestCrashRecovery kills a probed serving 1,000 targets with SIGKILL at a
// random point of 20 lives (5 with -short) and checks after each restart
// that
//   - every acknowledged target is there, in the state its own events
//     say, and targets whose backends stayed up are still ready, never
//     flapping to not-ready;
//   - revisions continue above the last one anyone saw before the kill;
//     none is reused;
//   - every watcher resumes by itself (client.Watch) and has delivered,
//     across every restart, exactly what a replay of the retained history
//     from the restarted server holds: every revision in range once, in
//     order, nothing else.
//
// Every fourth kill it also reads the data file the killed process left
// (it must open: never corrupt) and kills the next process during its
// startup.
func TestCrashRecovery(t *testing.T) {
	iterations := 20
	if testing.Short() {
		iterations = 5
	}
	began := time.Now()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	backends := newCrashBackends(t, 4)
	var flips sync.WaitGroup
	defer flips.Wait()
	defer cancel() // before Wait: stops the flipping
	flips.Go(func() { backends.flip(ctx) })

	bin := buildProbed(t)
	dir := t.TempDir()
	p := &crashProcess{t: t, bin: bin, args: crashChildArgs(t, refused.Reserve(t).Addr(), dir)}
	defer p.kill()
	if _, err := p.start(); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(p.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()), crashReconnect)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	c := client.New(conn)
	raw := probev1.NewProbeServiceClient(conn)

	// Watchers from the first revision, one of every event, one of the
	// flipping targets only; a third starts later from a snapshot.
	flipping := func(name string) bool { i, ok := crashIndex(name); return ok && i < crashFlipping }
	all := crashWatch(ctx, c, "all", 1, nil)
	watchers := []*crashWatcher{all, crashWatch(ctx, c, "flipping", 1, flipping, client.WithLabels(map[string]string{"group": "flip"}))}
	churn := &crashChurner{c: c, backends: backends, state: make(map[string]crashChurnState)}
	crashCreateBase(t, ctx, c, backends)
	crashWaitStableReady(t, ctx, c)
	snapWatcher := crashWatch(ctx, c, "snapshot", 0, nil)
	watchers = append(watchers, snapWatcher)
	poll.Until(t, "the snapshot watcher's snapshot", time.Minute, func() bool { return snapWatcher.progressNow() > 0 })
	var fig crashFigures
	defer func() { fig.report(t, iterations, churn, time.Since(began)) }()
	crashVerifyWindow(t, ctx, raw, watchers, crashSeen(watchers, churn), &fig)
	t.Logf("%d targets registered, the stable ones ready, after %v (revision %d)", crashTargets, time.Since(began).Round(time.Millisecond), fig.verified)

	for i := range iterations {
		// Serve with creates and deletes going on, then kill at a random
		// point.
		churnCtx, stopChurn := context.WithCancel(ctx)
		var churning sync.WaitGroup
		churning.Go(func() { churn.run(churnCtx) })
		// A random point of the process's life, in real time: the kill is
		// meant to land wherever the process is (no event to wait for).
		time.Sleep(time.Duration(100+rand.IntN(500)) * time.Millisecond)
		killedAt := p.kill()
		stopChurn()
		churning.Wait()
		fig.kills++
		seen := crashSeen(watchers, churn)
		var st *engine.Stored
		if i%4 == 3 || i == iterations-1 {
			st = crashCheckStored(t, dir, seen, all, watchers, churn, &fig)
			// Kill the next process during its startup (opening and
			// checking the file, loading, restoring, maybe serving).
			p.startAsync()
			time.Sleep(time.Duration(rand.IntN(80)) * time.Millisecond) // a random point of its startup, as above
			killedAt = p.kill()
			fig.kills++
			fig.startupKills++
			seen = max(seen, crashSeen(watchers, churn))
		}

		restarted := time.Now()
		serving, err := p.start()
		if err != nil {
			t.Fatal(err)
		}
		fig.serving = append(fig.serving, serving)
		// Every watcher resumes by itself, past what it had seen.
		for _, w := range watchers {
			poll.UntilMet(t, fmt.Sprintf("watcher %s resumed past revision %d (the last seen before the kill)", w.name, seen), 30*time.Second-time.Since(restarted), func() string {
				if got := w.progressNow(); got <= seen {
					return fmt.Sprintf("at %d", got)
				}
				return ""
			})
		}
		resumed := time.Since(restarted)
		fig.resumed = append(fig.resumed, resumed)
		checking := time.Now()
		firstNew := crashVerifyRestart(t, ctx, c, raw, all, watchers, churn, st, seen, killedAt, restarted, &fig)
		t.Logf("kill %d at %s: last revision seen %d, first new %d; serving %v after the restart, every watcher resumed after %v; %d transitions lost; checked in %v",
			i+1, killedAt.Format("15:04:05.000"), seen, firstNew, serving.Round(time.Millisecond), resumed.Round(time.Millisecond), fig.lost, time.Since(checking).Round(time.Millisecond))
		if t.Failed() {
			break
		}
	}
}

// crashFigures are what the crash test measured.
type crashFigures struct {
	kills, startupKills int
	serving             []time.Duration // restart until serving
	resumed             []time.Duration // restart until every watcher is past what it had seen
	verified            uint64          // every revision up to it was compared with a replay
	compared            int             // events compared with a replay or the data file
	replayed            int             // events replayed
	lost                int             // events a watcher saw that the store or the replay lacks
	lastRev             uint64
	timedOut            int // stable targets whose probes timed out (load)
}

func (f *crashFigures) report(t *testing.T, iterations int, churn *crashChurner, took time.Duration) {
	t.Helper()
	if len(f.serving) == 0 {
		return
	}
	spread := func(ds []time.Duration) string {
		s := slices.Sorted(slices.Values(ds))
		r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
		return fmt.Sprintf("%v/%v/%v", r(s[0]), r(s[len(s)/2]), r(s[len(s)-1]))
	}
	churn.mu.Lock()
	defer churn.mu.Unlock()
	t.Logf("crash test: %d iterations, %d SIGKILLs (%d during startup); %d targets, and %d created/%d deleted while serving (%d calls cut by a kill, %d of them committed)",
		iterations, f.kills, f.startupKills, crashTargets, churn.created, churn.deleted, churn.unknown, churn.unknownCommitted)
	t.Logf("crash test: restart to serving min/median/max %s; to every watcher resumed %s", spread(f.serving), spread(f.resumed))
	t.Logf("crash test: %d revisions, all verified; %d events replayed, %d compared; transitions lost: %d; stable targets whose probes timed out under load: %d; took %v",
		f.lastRev, f.replayed, f.compared, f.lost, f.timedOut, took.Round(time.Millisecond))
}

// crashReconnect makes gRPC redial the restarted server within tens of
// milliseconds instead of its default second.
var crashReconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 100 * time.Millisecond},
	MinConnectTimeout: time.Second,
})

// crashSeen is the last revision anyone saw: delivered to a watcher or
// returned by an acknowledged call.
func crashSeen(watchers []*crashWatcher, churn *crashChurner) uint64 {
	seen := churn.maxAck()
	for _, w := range watchers {
		seen = max(seen, w.progressNow())
	}
	return seen
}

// crashChildArgs are the child's flags: the real defaults but for the
// address, the data dir, the history retained and, for the flags this
// build has, no metrics listener (its default port may be taken) and no
// rate limit on registrations (the test registers 1,000 targets at once,
// from one client). The log level stays info: "probed serving" says the
// server is up.
func crashChildArgs(t *testing.T, addr, dir string) []string {
	t.Helper()
	args := []string{"--addr", addr, "--data-dir", dir, "--history", strconv.Itoa(crashHistory)}
	for _, opt := range []string{"--metrics-addr=", "--registrations-per-second=0"} {
		if _, err := parseFlags(append(slices.Clone(args), opt), io.Discard); err == nil {
			args = append(args, opt)
		}
	}
	if _, err := parseFlags(args, io.Discard); err != nil {
		t.Fatalf("child flags %v: %v", args, err)
	}
	return args
}

// crashProcess is the probed child: started, killed, started again (a
// probedproc.Process each life).
type crashProcess struct {
	t    *testing.T
	bin  string
	args []string

	proc *probedproc.Process // the current life; nil before the first and once it ended
	last *probedproc.Process // the current or latest life, whose log log returns
}

func (p *crashProcess) addr() string { return p.args[1] }

// startAsync starts the child without waiting for it to serve.
func (p *crashProcess) startAsync() {
	p.t.Helper()
	proc, err := probedproc.Start(p.bin, p.args, probedproc.Options{})
	if err != nil {
		p.t.Fatal(err)
	}
	p.proc, p.last = proc, proc
}

// start starts the child and returns how long it took to serve.
func (p *crashProcess) start() (time.Duration, error) {
	p.t.Helper()
	began := time.Now()
	p.startAsync()
	if err := p.wait(); err != nil {
		return 0, err
	}
	return time.Since(began), nil
}

// wait waits until the child started by startAsync serves (60 s at the
// most: a restart replays its data file).
func (p *crashProcess) wait() error {
	p.t.Helper()
	err := p.proc.WaitServing(60 * time.Second)
	if err != nil {
		p.proc = nil // ended: kill has nothing to do
	}
	return err
}

// running reports whether the child runs (started, not exited).
func (p *crashProcess) running() bool { return p.proc != nil && p.proc.Running() }

// pid is the child's process id.
func (p *crashProcess) pid() int { return p.proc.Pid() }

// log is what the current (or latest) life of the child wrote.
func (p *crashProcess) log() string {
	if p.last == nil {
		return ""
	}
	return p.last.Log()
}

// signal sends sig to the child.
func (p *crashProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.proc.Signal(sig); err != nil {
		t.Fatalf("%v: %v", sig, err)
	}
}

// kill kills the child with SIGKILL, waits for it and returns when.
func (p *crashProcess) kill() time.Time {
	p.t.Helper()
	at := time.Now()
	if p.proc == nil {
		return at
	}
	if err := p.proc.Kill(); err != nil {
		p.t.Error(err)
	}
	p.proc = nil
	return at
}

// crashBackends are the targets: HTTP/1.1 servers answering GET /t/<i>
// with target i's status. They are minimal keep-alive responders, not
// net/http servers: under the race detector a net/http server costs about
// ten times more per request, and the targets take 10,000 requests a
// second.
type crashBackends struct {
	status [crashTargets]atomic.Int32
	// hits counts the requests for each target, last is the time of the
	// latest (UnixNano), and gap the longest time between two requests
	// (or since the latest) since resetGaps: the cluster tests' view of
	// which targets were probed when.
	hits [crashTargets]atomic.Int64
	last [crashTargets]atomic.Int64
	gap  [crashTargets]atomic.Int64
	// flips counts the flips of each flipping target.
	flips [crashFlipping]atomic.Int64
	lis   []net.Listener
	wg    sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func newCrashBackends(t *testing.T, servers int) *crashBackends {
	t.Helper()
	b := &crashBackends{conns: make(map[net.Conn]struct{})}
	for i := range b.status {
		switch {
		case i < crashFlipping:
			b.status[i].Store(int32([]int{http.StatusOK, http.StatusServiceUnavailable}[rand.IntN(2)]))
		case i < crashFlipping+crashDown:
			b.status[i].Store(http.StatusServiceUnavailable)
		default:
			b.status[i].Store(http.StatusOK)
		}
	}
	for range servers {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		b.lis = append(b.lis, l)
		b.wg.Go(func() { b.accept(l) })
	}
	t.Cleanup(func() {
		for _, l := range b.lis {
			_ = l.Close()
		}
		b.mu.Lock()
		for c := range b.conns {
			_ = c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *crashBackends) accept(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Go(func() {
			b.serve(c)
			b.mu.Lock()
			delete(b.conns, c)
			b.mu.Unlock()
			_ = c.Close()
		})
	}
}

var crashResponses = map[int32][]byte{
	http.StatusOK:                 []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
	http.StatusServiceUnavailable: []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"),
	http.StatusNotFound:           []byte("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
}

// serve answers the requests of one connection: a request line, headers
// up to an empty line, no body (GET).
func (b *crashBackends) serve(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		code := int32(http.StatusNotFound)
		if f := strings.Fields(string(line)); len(f) == 3 {
			if i, err := strconv.Atoi(strings.TrimPrefix(f[1], "/t/")); err == nil && i >= 0 && i < crashTargets {
				code = b.status[i].Load()
				b.hit(i)
			}
		}
		for {
			h, err := r.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(h) <= 2 { // "\r\n"
				break
			}
		}
		if _, err := c.Write(crashResponses[code]); err != nil {
			return
		}
	}
}

// hit records a request for target i.
func (b *crashBackends) hit(i int) {
	now := time.Now().UnixNano()
	b.hits[i].Add(1)
	if prev := b.last[i].Swap(now); prev != 0 {
		crashRaise(&b.gap[i], now-prev)
	}
}

// crashRaise raises v to at least x.
func crashRaise(v *atomic.Int64, x int64) {
	for cur := v.Load(); x > cur && !v.CompareAndSwap(cur, x); cur = v.Load() {
	}
}

// resetGaps starts measuring the longest gap between requests afresh.
func (b *crashBackends) resetGaps() {
	for i := range b.gap {
		b.gap[i].Store(0)
	}
}

// longestGap is the longest time target i went without a request since
// resetGaps, counting the time since its latest request.
func (b *crashBackends) longestGap(i int) time.Duration {
	gap := b.gap[i].Load()
	if last := b.last[i].Load(); last != 0 {
		gap = max(gap, time.Now().UnixNano()-last)
	}
	return time.Duration(gap)
}

// probedSince reports whether target i had a request after at.
func (b *crashBackends) probedSince(i int, at time.Time) bool {
	return b.last[i].Load() > at.UnixNano()
}

// flip toggles every flipping backend after a random 100-300ms, again and
// again, until ctx is done.
func (b *crashBackends) flip(ctx context.Context) {
	b.flipEvery(ctx, 100*time.Millisecond, 300*time.Millisecond)
}

// flipEvery toggles every flipping backend after a random time in
// [lo, hi), again and again, until ctx is done.
func (b *crashBackends) flipEvery(ctx context.Context, lo, hi time.Duration) {
	next := func(now time.Time) time.Time { return now.Add(lo + rand.N(hi-lo)) }
	due := make([]time.Time, crashFlipping)
	for i := range due {
		due[i] = next(time.Now())
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for i := range due {
				if now.After(due[i]) {
					b.status[i].Store(http.StatusOK + http.StatusServiceUnavailable - b.status[i].Load())
					b.flips[i].Add(1)
					due[i] = next(now)
				}
			}
		}
	}
}

// target returns the spec of a target probing backend i every 100ms.
func (b *crashBackends) target(name, group string, i int) *probev1.Target {
	return b.targetEvery(name, group, i, 100*time.Millisecond)
}

// targetEvery returns the spec of a target probing backend i every period.
func (b *crashBackends) targetEvery(name, group string, i int, period time.Duration) *probev1.Target {
	host, port, _ := net.SplitHostPort(b.lis[i%len(b.lis)].Addr().String())
	p, _ := strconv.Atoi(port)
	secs, millis := client.ProbeDuration(period)
	rp := &probev1.Probe{
		Handler:            &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: host, Port: int32(p), Path: "/t/" + strconv.Itoa(i)}},
		PeriodSeconds:      secs,
		PeriodMilliseconds: millis,
	}
	if group == "flip" {
		rp.FailureThreshold = 1 // every flip the probe sees is a transition
	}
	return &probev1.Target{Name: name, Labels: map[string]string{"group": group}, ReadinessProbe: rp}
}

func crashName(i int) string { return fmt.Sprintf("t-%04d", i) }

// crashIndex returns the backend index of a base target's name.
func crashIndex(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "t-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	return i, err == nil
}

// crashStableUp reports whether the backend of name answers 200 throughout:
// the stable base targets and every churn target.
func crashStableUp(name string) bool {
	if strings.HasPrefix(name, crashChurn) {
		return true
	}
	i, ok := crashIndex(name)
	return ok && i >= crashFlipping+crashDown
}

// crashCreateBase registers the 1,000 base targets, eight at a time.
func crashCreateBase(t *testing.T, ctx context.Context, c *client.Client, b *crashBackends) {
	t.Helper()
	crashCreate(t, ctx, c, b, crashTargets, 100*time.Millisecond)
}

// crashCreate registers base targets t-0000 up to n (the first
// crashFlipping flipping, the next crashDown down, the rest stable)
// probing their backends every period, eight at a time.
func crashCreate(t *testing.T, ctx context.Context, c *client.Client, b *crashBackends, n int, period time.Duration) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				group := "stable"
				switch {
				case i < crashFlipping:
					group = "flip"
				case i < crashFlipping+crashDown:
					group = "down"
				}
				if _, err := c.Create(ctx, b.targetEvery(crashName(i), group, i, period)); err != nil {
					errs <- fmt.Errorf("Create(%s): %w", crashName(i), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// crashWaitStableReady waits until every stable base target is ready.
func crashWaitStableReady(t *testing.T, ctx context.Context, c *client.Client) {
	t.Helper()
	crashWaitReady(t, ctx, c, crashTargets-crashFlipping-crashDown, 30*time.Second)
}

// crashWaitReady waits up to limit until want stable targets are ready.
func crashWaitReady(t *testing.T, ctx context.Context, c *client.Client, want int, limit time.Duration) {
	t.Helper()
	poll.UntilMet(t, "stable targets ready", limit, func() string {
		all, err := c.ListAll(ctx, map[string]string{"group": "stable"})
		if err != nil {
			t.Fatal(err)
		}
		ready := 0
		for _, tg := range all {
			if tg.GetStatus().GetReady() {
				ready++
			}
		}
		if ready == want {
			return ""
		}
		return fmt.Sprintf("%d of %d stable targets ready after %v", ready, want, limit)
	})
}

// crashEvent is what identifies an event, comparable across the live stream,
// a replay and the data file.
type crashEvent struct {
	rev                  uint64
	name, kind           string
	probe, from, to      string
	consecutive          int32
	latency              time.Duration
	ready, started, live bool
	reason, message      string
	at                   int64
}

func crashEnum(s, prefix string) string { return strings.ToLower(strings.TrimPrefix(s, prefix)) }

func crashProtoEvent(ev *probev1.Event) crashEvent {
	k := crashEvent{
		rev: ev.GetRevision(), name: ev.GetName(), kind: crashEnum(ev.GetKind().String(), "EVENT_KIND_"),
		ready: ev.GetReady(), started: ev.GetStarted(), live: ev.GetLive(),
		reason: ev.GetReason(), message: ev.GetMessage(), at: ev.GetTime().AsTime().UnixNano(),
	}
	if k.kind == "transition" || k.kind == "initialized" {
		k.probe = crashEnum(ev.GetProbeType().String(), "PROBE_TYPE_")
		k.from = crashEnum(ev.GetFrom().String(), "RESULT_")
		k.to = crashEnum(ev.GetTo().String(), "RESULT_")
		k.consecutive = ev.GetConsecutive()
		k.latency = ev.GetLatency().AsDuration()
	}
	return k
}

func crashStoredEvent(ev *engine.Event) crashEvent {
	k := crashEvent{
		rev: ev.Revision, name: ev.Name, kind: strings.ToLower(ev.Kind.String()),
		ready: ev.Ready, started: ev.Started, live: ev.Live,
		reason: ev.Reason, message: ev.Message, at: ev.Time.UnixNano(),
	}
	if ev.Kind == engine.KindTransition || ev.Kind == engine.KindInitialized {
		k.probe, k.from, k.to = ev.Probe.String(), ev.From.String(), ev.To.String()
		k.consecutive, k.latency = ev.Consecutive, ev.Latency
	}
	return k
}

func (k crashEvent) String() string {
	s := fmt.Sprintf("%d %s %s", k.rev, k.name, k.kind)
	if k.probe != "" {
		s += fmt.Sprintf(" %s %s→%s", k.probe, k.from, k.to)
	}
	return s
}

// crashState is what the test checks of a target: its phase, readiness
// result and the revision of its last event.
type crashState struct {
	phase, readiness string
	rev              uint64
}

// crashReplayState applies events in revision order and returns the state
// of every target they leave. An event that does not follow from the ones
// before (about a target that does not exist, a transition from another
// result) is an error that lists every event about its target.
func crashReplayState(events []crashEvent) (map[string]crashState, error) {
	m := make(map[string]crashState)
	for _, ev := range events {
		if err := crashApply(m, ev); err != nil {
			var about []string
			for _, e := range events {
				if e.name == ev.name {
					about = append(about, fmt.Sprintf("%v at %s (%s %q)", e, time.Unix(0, e.at).Format("15:04:05.000000"), e.reason, e.message))
				}
			}
			return nil, fmt.Errorf("event %v: %w; the events about %s: %s", ev, err, ev.name, strings.Join(about, "; "))
		}
	}
	return m, nil
}

func crashApply(m map[string]crashState, ev crashEvent) error {
	ts, ok := m[ev.name]
	switch {
	case ev.kind == "created" && ok:
		return errors.New("created twice")
	case ev.kind == "created":
		m[ev.name] = crashState{phase: "active", readiness: "failure", rev: ev.rev}
		return nil
	case !ok:
		return errors.New("about a target that does not exist")
	case ev.kind == "deleted":
		delete(m, ev.name)
		return nil
	case ev.kind == "terminating":
		ts.phase = "terminating"
	case ev.kind == "transition" && ev.probe == "readiness":
		if ev.from != ts.readiness {
			return fmt.Errorf("readiness was %s", ts.readiness)
		}
		ts.readiness = ev.to
	}
	ts.rev = ev.rev
	m[ev.name] = ts
	return nil
}

// crashDiffStates lists (up to 10) differences between want and got.
func crashDiffStates(want, got map[string]crashState) []string {
	names := make(map[string]bool, len(want))
	for n := range want {
		names[n] = true
	}
	for n := range got {
		names[n] = true
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(names)) {
		w, wok := want[name]
		g, gok := got[name]
		if wok != gok || w != g {
			out = append(out, fmt.Sprintf("%s: %+v (exists %v), want %+v (exists %v)", name, g, gok, w, wok))
			if len(out) == 10 {
				break
			}
		}
	}
	return out
}

// crashWatcher is a client.Watch that records every event it delivers.
type crashWatcher struct {
	name  string
	match func(name string) bool // nil: every target

	mu       sync.Mutex
	start    uint64 // first revision covered (0 until a snapshot completes)
	events   []crashEvent
	progress uint64 // every event up to it was delivered or filtered out
	problems []string
	snapshot map[string]crashState
	snapRev  uint64
}

func crashWatch(ctx context.Context, c *client.Client, name string, since uint64, match func(string) bool, opts ...client.WatchOption) *crashWatcher {
	w := &crashWatcher{name: name, match: match, start: since, snapshot: make(map[string]crashState)}
	opts = append([]client.WatchOption{client.WithSince(since), client.WithBackoff(10*time.Millisecond, 100*time.Millisecond)}, opts...)
	ch := c.Watch(ctx, opts...)
	go func() {
		for r := range ch {
			w.record(r)
		}
	}()
	return w
}

func (w *crashWatcher) record(r client.WatchResponse) {
	w.mu.Lock()
	defer w.mu.Unlock()
	problem := func(format string, args ...any) {
		if len(w.problems) < 20 {
			w.problems = append(w.problems, fmt.Sprintf(format, args...))
		}
	}
	switch {
	case r.Err != nil:
		problem("watch ended: %v", r.Err)
	case r.Resynced:
		problem("resynced at revision %d: the watch could not resume where it was", r.Revision)
	case r.Snapshot:
		if w.start != 0 {
			problem("a snapshot in a watch that resumes by revision")
			return
		}
		for _, ev := range r.Events {
			w.snapshot[ev.GetName()] = crashSnapshotState(ev.GetTarget())
		}
		if r.SnapshotComplete {
			w.snapRev, w.start, w.progress = r.Revision, r.Revision+1, r.Revision
		}
	default:
		for _, ev := range r.Events {
			k := crashProtoEvent(ev)
			if n := len(w.events); k.rev < w.start || (n > 0 && k.rev <= w.events[n-1].rev) {
				problem("event %v after %d: out of order or delivered twice", k, w.lastRevLocked())
			}
			if w.match != nil && !w.match(k.name) {
				problem("event %v does not match the filter", k)
			}
			w.events = append(w.events, k)
			w.progress = max(w.progress, k.rev)
		}
		w.progress = max(w.progress, r.Revision)
	}
}

func (w *crashWatcher) lastRevLocked() uint64 {
	if len(w.events) == 0 {
		return 0
	}
	return w.events[len(w.events)-1].rev
}

func (w *crashWatcher) progressNow() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.progress
}

// check compares what w delivered from revision from up to upTo with
// history (the events in revision order from revision from on): the
// events of every revision from max(from, w's start) to min(progress,
// upTo) that its filter matches, each exactly once, in order, and nothing
// else. It returns how many events it compared and how many w saw that
// history lacks (or holds another event at their revision).
func (w *crashWatcher) check(t *testing.T, source string, from uint64, history []crashEvent, upTo uint64) (compared, lost int) {
	t.Helper()
	w.mu.Lock()
	start, progress := w.start, min(w.progress, upTo)
	var got []crashEvent
	for _, ev := range w.events {
		if ev.rev >= from && ev.rev <= progress {
			got = append(got, ev)
		}
	}
	problems := w.problems
	w.problems = nil // reported once
	w.mu.Unlock()
	for _, p := range problems {
		t.Errorf("watcher %s: %s", w.name, p)
	}
	if start == 0 {
		t.Errorf("watcher %s: snapshot not complete", w.name)
		return 0, 0
	}
	if len(history) == 0 || history[len(history)-1].rev < progress {
		t.Errorf("watcher %s has seen up to revision %d; %s ends before it", w.name, progress, source)
		return 0, 0
	}
	var want []crashEvent
	inHistory := make(map[uint64]crashEvent)
	for _, ev := range history {
		if ev.rev >= start && ev.rev <= progress && (w.match == nil || w.match(ev.name)) {
			want = append(want, ev)
			inHistory[ev.rev] = ev
		}
	}
	for _, ev := range got {
		if h, ok := inHistory[ev.rev]; !ok || h != ev { // missing, or its revision reused
			lost++
		}
	}
	if !slices.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		at := func(evs []crashEvent) string {
			if i < len(evs) {
				return fmt.Sprintf("%v (%+v)", evs[i], evs[i])
			}
			return "nothing"
		}
		t.Errorf("watcher %s delivered %d events from revision %d to %d, %s has %d: they differ first at #%d: delivered %s, %s has %s",
			w.name, len(got), start, progress, source, len(want), i, at(got), source, at(want))
	}
	return len(want), lost
}

// crashChurnState is what the test knows of a target it created or deleted
// while probed could be killed.
type crashChurnState int

const (
	churnCreating crashChurnState = iota // Create failed: created or not
	churnCreated                         // Create returned OK
	churnDeleting                        // Delete failed: deleted or not
	churnDeleted                         // Delete returned OK
)

// crashChurner creates and deletes targets while the server runs (and is
// killed): it tracks which were acknowledged.
type crashChurner struct {
	c        *client.Client
	backends *crashBackends

	mu               sync.Mutex
	next             int
	state            map[string]crashChurnState
	acks             []crashEvent // events acknowledged calls returned (name, kind, revision)
	created, deleted int          // acknowledged
	unknown          int          // calls that failed: outcome unknown until the restart
	unknownCommitted int          // of those, how many turned out to be committed
}

func (ch *crashChurner) run(ctx context.Context) {
	for ctx.Err() == nil {
		ch.step()
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(5+rand.IntN(10)) * time.Millisecond):
		}
	}
}

// step creates a target, or deletes one it created. Its call is not
// cancelled when the churn stops, only failed by a kill: a call that
// failed may or may not have been committed.
func (ch *crashChurner) step() {
	ch.mu.Lock()
	var created []string
	for name, st := range ch.state {
		if st == churnCreated {
			created = append(created, name)
		}
	}
	del := len(created) > 10 && rand.IntN(5) < 2
	var name string
	if del {
		name = created[rand.IntN(len(created))]
	} else {
		name = fmt.Sprintf("%s%05d", crashChurn, ch.next)
		ch.next++
	}
	ch.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var tg *probev1.Target
	var err error
	if del {
		tg, err = ch.c.Delete(ctx, name)
	} else {
		tg, err = ch.c.Create(ctx, ch.backends.target(name, "churn", crashTargets-1))
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	switch {
	case err != nil && del:
		ch.state[name] = churnDeleting
		ch.unknown++
	case err != nil:
		ch.state[name] = churnCreating
		ch.unknown++
	case del:
		ch.state[name] = churnDeleted
		ch.deleted++
		ch.acks = append(ch.acks, crashEvent{rev: tg.GetStatus().GetRevision(), name: name, kind: "terminating"})
	default:
		ch.state[name] = churnCreated
		ch.created++
		ch.acks = append(ch.acks, crashEvent{rev: tg.GetStatus().GetRevision(), name: name, kind: "created"})
	}
}

func (ch *crashChurner) maxAck() uint64 {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var m uint64
	for _, a := range ch.acks {
		m = max(m, a.rev)
	}
	return m
}

// checkAcked checks the acknowledged targets against states (after a
// kill): every acknowledged create is there and active, every
// acknowledged delete is not active; with resolve, the outcomes of the
// calls that failed are learnt from states.
func (ch *crashChurner) checkAcked(t *testing.T, source string, states map[string]crashState, resolve bool) {
	t.Helper()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for name, st := range ch.state {
		ts, ok := states[name]
		active := ok && ts.phase == "active"
		switch st {
		case churnCreated:
			if !active {
				t.Errorf("%s: acknowledged target %s is %+v (exists %v), want active", source, name, ts, ok)
			}
		case churnDeleted:
			if active {
				t.Errorf("%s: target %s whose delete was acknowledged is active", source, name)
			}
			if resolve && !ok {
				delete(ch.state, name)
			}
		case churnCreating:
			if !resolve {
				continue
			}
			if ok {
				ch.state[name] = churnCreated
				ch.unknownCommitted++
			} else {
				delete(ch.state, name)
			}
		case churnDeleting:
			if !resolve {
				continue
			}
			switch {
			case !ok:
				delete(ch.state, name)
				ch.unknownCommitted++
			case active:
				ch.state[name] = churnCreated
			default:
				ch.state[name] = churnDeleted
				ch.unknownCommitted++
			}
		}
	}
}

// checkAckEvents checks that the event of every acknowledged call is in
// history.
func (ch *crashChurner) checkAckEvents(t *testing.T, source string, history map[uint64]crashEvent) {
	t.Helper()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, a := range ch.acks {
		if ev, ok := history[a.rev]; !ok || ev.name != a.name || ev.kind != a.kind {
			t.Errorf("%s: the acknowledged %s of %s at revision %d is %v (present %v)", source, a.kind, a.name, a.rev, ev, ok)
		}
	}
}

// crashCheckStates checks states against what the test knows: every base
// target is there and active, the stable ones ready (but those whose
// probes timed out, see crashNoFlap).
func crashCheckStates(t *testing.T, source string, states map[string]crashState, ready func(name string) bool, timedOut map[string]bool) {
	t.Helper()
	bad := 0
	for i := range crashTargets {
		name := crashName(i)
		ts, ok := states[name]
		switch {
		case !ok || ts.phase != "active":
			t.Errorf("%s: target %s is %+v (exists %v), want active", source, name, ts, ok)
			bad++
		case crashStableUp(name) && !timedOut[name] && (ts.readiness != "success" || !ready(name)):
			t.Errorf("%s: target %s, whose backend never failed, is %+v (ready %v): it flapped to not-ready", source, name, ts, ready(name))
			bad++
		}
		if bad == 10 {
			return
		}
	}
}

// crashNoFlap checks that no target whose backend never failed had its
// readiness published as failure, but by its own deletion or by probes
// that timed out (failureThreshold times in a row: the test's own HTTP
// servers, under the race detector on a loaded machine, may be that
// slow); it returns the targets of those.
func crashNoFlap(t *testing.T, source string, history []crashEvent) (timedOut map[string]bool) {
	t.Helper()
	timedOut = make(map[string]bool)
	for _, ev := range history {
		if ev.kind != "transition" || ev.probe != "readiness" || ev.to == "success" || !crashStableUp(ev.name) || ev.reason == engine.ReasonTerminating {
			continue
		}
		if strings.Contains(ev.message, "timed out") {
			timedOut[ev.name] = true
			continue
		}
		t.Errorf("%s: %v: a target whose backend never failed flapped to not-ready (%q)", source, ev, ev.message)
	}
	return timedOut
}

// crashCheckStored reads the data file the killed process left, as the
// next one will: it must open, hold a revision at least seen (the last
// one anyone saw), the events any watcher saw (those still retained), and
// targets in the state their events say (all's events, then the file's
// beyond them).
func crashCheckStored(t *testing.T, dir string, seen uint64, all *crashWatcher, watchers []*crashWatcher, churn *crashChurner, fig *crashFigures) *engine.Stored {
	t.Helper()
	s, err := bolt.Open(dir)
	if err != nil {
		t.Fatalf("data file after SIGKILL: %v", err)
	}
	st, err := s.Load(context.Background())
	if cerr := s.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatalf("data file after SIGKILL: %v", err)
	}
	if st.Revision < seen {
		t.Errorf("stored revision %d after SIGKILL, but revision %d was seen before it: acknowledged or published changes were lost", st.Revision, seen)
	}
	history := make([]crashEvent, len(st.Events))
	for i := range st.Events {
		history[i] = crashStoredEvent(&st.Events[i])
	}
	if crashLast(history) != st.Revision {
		t.Fatalf("stored events end at revision %d, the stored revision is %d", crashLast(history), st.Revision)
	}
	from := crashFirst(history)
	for _, w := range watchers {
		n, lost := w.check(t, "the data file", from, history, st.Revision)
		fig.compared += n
		fig.lost += lost
	}
	all.mu.Lock()
	events := slices.Clone(all.events)
	all.mu.Unlock()
	for _, ev := range history {
		if ev.rev > crashLast(events) {
			events = append(events, ev)
		}
	}
	want, err := crashReplayState(events)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	got := make(map[string]crashState, len(st.Targets))
	ready := make(map[string]bool, len(st.Targets))
	for _, tg := range st.Targets {
		got[tg.Spec.Name] = crashState{
			phase:     tg.Status.Phase.String(),
			readiness: tg.Status.Probes[probe.Readiness].Result.String(),
			rev:       tg.Status.Revision,
		}
		ready[tg.Spec.Name] = tg.Status.Ready()
	}
	for _, d := range crashDiffStates(want, got) {
		t.Errorf("stored target differs from its events: %s", d)
	}
	timedOut := crashNoFlap(t, "data file", events)
	fig.timedOut = len(timedOut)
	crashCheckStates(t, "data file", got, func(name string) bool { return ready[name] }, timedOut)
	churn.checkAcked(t, "data file", got, false)
	return st
}

func crashFirst(evs []crashEvent) uint64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[0].rev
}

func crashLast(evs []crashEvent) uint64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].rev
}

// crashVerifyRestart checks the restarted server against what the
// watchers delivered (all delivers every event from revision 1), what
// acknowledged calls returned, and st, the data file the killed process
// left, when not nil; it returns the first revision the new process
// made.
func crashVerifyRestart(t *testing.T, ctx context.Context, c *client.Client, raw probev1.ProbeServiceClient, all *crashWatcher, watchers []*crashWatcher,
	churn *crashChurner, st *engine.Stored, seen uint64, killedAt, restarted time.Time, fig *crashFigures) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	states, ready, snapRev := crashSnapshot(t, ctx, c)
	if snapRev < seen {
		t.Errorf("restarted server's revision %d is below %d, seen before the kill", snapRev, seen)
	}
	churn.checkAcked(t, "after the restart", states, true)

	// Compare the watchers up to at least the snapshot.
	upTo := snapRev
	for _, w := range watchers {
		poll.UntilMet(t, fmt.Sprintf("watcher %s at the snapshot's revision %d", w.name, snapRev), 60*time.Second, func() string {
			if got := w.progressNow(); got < snapRev {
				return fmt.Sprintf("at %d", got)
			}
			return ""
		})
		upTo = max(upTo, w.progressNow())
	}
	from, history := crashVerifyWindow(t, ctx, raw, watchers, upTo, fig)

	// Revisions continue: what the new process made (after the restart)
	// comes after everything seen before the kill and everything the
	// killed process made.
	var firstNew uint64
	for _, ev := range history {
		switch made := time.Unix(0, ev.at); {
		case made.Before(killedAt) && firstNew != 0:
			t.Errorf("event %v, made before the kill, comes after %d, made after the restart: a revision was reused", ev, firstNew)
		case made.After(restarted) && firstNew == 0:
			firstNew = ev.rev
			if ev.rev <= seen {
				t.Errorf("the first event made after the restart, %v, has a revision not above %d, seen before the kill", ev, seen)
			}
		}
	}
	if st != nil {
		n := 0
		for i := range st.Events {
			want := crashStoredEvent(&st.Events[i])
			if want.rev < from {
				continue
			}
			if n >= len(history) || history[n] != want {
				t.Fatalf("replay after the restart differs from the data file at revision %d", want.rev)
			}
			n++
		}
		fig.compared += n
		if firstNew != 0 && firstNew <= st.Revision {
			t.Errorf("first revision made after the restart %d, not above the stored %d", firstNew, st.Revision)
		}
	}

	// The targets are in the state their events say, at the snapshot's
	// revision (all has every event from revision 1, verified window by
	// window against the replays).
	all.mu.Lock()
	var upToSnap []crashEvent
	for _, ev := range all.events {
		if ev.rev <= snapRev {
			upToSnap = append(upToSnap, ev)
		}
	}
	all.mu.Unlock()
	want, err := crashReplayState(upToSnap)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	for _, d := range crashDiffStates(want, states) {
		t.Errorf("snapshot at revision %d differs from the history up to it: %s", snapRev, d)
	}
	for _, w := range watchers {
		w.mu.Lock()
		snap, rev := w.snapshot, w.snapRev
		w.snapRev = 0 // compared once
		w.mu.Unlock()
		if rev > 0 {
			var evs []crashEvent
			for _, ev := range upToSnap {
				if ev.rev <= rev {
					evs = append(evs, ev)
				}
			}
			if want, err := crashReplayState(evs); err == nil {
				for _, d := range crashDiffStates(want, snap) {
					t.Errorf("watcher %s's snapshot at revision %d differs from the history: %s", w.name, rev, d)
				}
			}
		}
	}
	byRev := make(map[uint64]crashEvent, len(upToSnap))
	for _, ev := range upToSnap {
		byRev[ev.rev] = ev
	}
	churn.checkAckEvents(t, "history", byRev)
	timedOut := crashNoFlap(t, "history", upToSnap)
	fig.timedOut = len(timedOut)
	crashCheckStates(t, "after the restart", states, func(name string) bool { return ready[name] }, timedOut)
	return firstNew
}

// crashSnapshot returns the state of every target from a Watch snapshot, the
// ready flags, and the revision it is consistent at.
func crashSnapshot(t *testing.T, ctx context.Context, c *client.Client) (map[string]crashState, map[string]bool, uint64) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	states := make(map[string]crashState)
	ready := make(map[string]bool)
	for r := range c.Watch(ctx, client.WithBackoff(10*time.Millisecond, 100*time.Millisecond)) {
		if r.Err != nil || !r.Snapshot {
			t.Fatalf("snapshot: %+v", r)
		}
		for _, ev := range r.Events {
			states[ev.GetName()] = crashSnapshotState(ev.GetTarget())
			ready[ev.GetName()] = ev.GetTarget().GetStatus().GetReady()
		}
		if r.SnapshotComplete {
			return states, ready, r.Revision
		}
	}
	t.Fatal("snapshot: the watch ended")
	return nil, nil, 0
}

func crashSnapshotState(tg *probev1.Target) crashState {
	return crashState{
		phase:     crashEnum(tg.GetStatus().GetPhase().String(), "PHASE_"),
		readiness: crashEnum(tg.GetStatus().GetReadiness().GetResult().String(), "RESULT_"),
		rev:       tg.GetStatus().GetRevision(),
	}
}

// crashVerifyWindow compares every watcher with a replay of the retained
// history up to upTo, which must overlap what was verified before (so
// that, window after window, every revision is), and returns the replay.
func crashVerifyWindow(t *testing.T, ctx context.Context, raw probev1.ProbeServiceClient, watchers []*crashWatcher, upTo uint64, fig *crashFigures) (from uint64, history []crashEvent) {
	t.Helper()
	from, history = crashReplay(t, ctx, raw, upTo)
	fig.replayed += len(history)
	if from > fig.verified+1 {
		t.Fatalf("the retained history starts at revision %d, but only revisions up to %d were verified: raise crashHistory", from, fig.verified)
	}
	for _, w := range watchers {
		n, lost := w.check(t, "the replay", from, history, upTo)
		fig.compared += n
		fig.lost += lost
	}
	fig.verified, fig.lastRev = upTo, upTo
	return from, history
}

// crashReplay replays the retained history up to upTo with a Watch from
// revision 1 or, when that is compacted, from the oldest retained
// revision the server names (plus a margin: the oldest moves with every
// new event); it returns where the replay started and the events.
func crashReplay(t *testing.T, ctx context.Context, raw probev1.ProbeServiceClient, upTo uint64) (from uint64, events []crashEvent) {
	t.Helper()
	from = 1
	for attempt := 0; ; attempt++ {
		events, err := crashReplayFrom(ctx, raw, from, upTo)
		if err == nil {
			return from, events
		}
		oldest, ok := crashOldest(err)
		if !ok || attempt == 5 {
			t.Fatalf("replay from revision %d: %v", from, err)
		}
		from = oldest + crashHistory/10
	}
}

func crashReplayFrom(ctx context.Context, raw probev1.ProbeServiceClient, from, upTo uint64) ([]crashEvent, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := raw.Watch(ctx, &probev1.WatchRequest{SinceRevision: from})
	if err != nil {
		return nil, err
	}
	var out []crashEvent
	for {
		r, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		if r.GetSnapshot() {
			return nil, errors.New("a snapshot in a replay")
		}
		for _, ev := range r.GetEvents() {
			k := crashProtoEvent(ev)
			if k.rev > upTo {
				return out, nil
			}
			if (len(out) == 0 && k.rev < from) || (len(out) > 0 && k.rev <= out[len(out)-1].rev) {
				return nil, fmt.Errorf("revision %d after %d in a replay from %d", k.rev, crashLast(out), from)
			}
			out = append(out, k)
		}
		if r.GetRevision() >= upTo {
			return out, nil
		}
	}
}

// crashOldest returns the oldest retained revision an OutOfRange error
// names.
func crashOldest(err error) (uint64, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.OutOfRange {
		return 0, false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if v, err := strconv.ParseUint(info.GetMetadata()["oldest_revision"], 10, 64); err == nil {
				return v, true
			}
		}
	}
	return 0, false
}
