// Package engine is probed's domain: it keeps the registered targets, runs
// their probes on a timer wheel, turns raw outcomes into published results
// with Kubernetes' semantics, writes every change durably through a Store
// before publishing it as an Event, and streams events to watchers.
//
// # Structure
//
//   - Engine (engine.go): options, Open, Run, Stats. Run owns every
//     goroutine: the executor's, the committer's, the follow, drain and
//     compaction loops; all have returned when it returns.
//   - The executor (executor.go) runs probes: every run — a fire of the
//     timer wheel, the first run of a probe, a trigger — goes through it:
//     one busy flag per probe, one in-flight limit, wheel IDs within the
//     wheel's capacity, every run waited for. A run is one step (step.go):
//     check, apply the outcome to the state machine, submit the change.
//   - Ownership (own.go): a registered target is probed only while owned,
//     as the store's log says (Delivery.Owned); Release stops probing the
//     targets of shards before the replica gives them up.
//   - Lifecycle (lifecycle.go, trigger.go, drain.go): Create, Update,
//     Reset, Delete and its drain, Trigger.
//   - Publishing: the committer writes (commit.go, group commit into the
//     Store); the follow loop (follow.go) applies what the store's Follow
//     delivers — every store's one ordered log: the registry's changes and
//     the ownership — and publishes it to the feed (feed.go: view,
//     history, watchers; watch.go).
//
// # Locks
//
// Lock order, outermost first (an arrow: may be taken while holding):
//
//	Engine.own (ownership) → Engine.mu (registry) → entry.mu (one target) → executor.mu (wheel IDs)
//	                                                                     → wheel shard locks
//	                                                                     → committer.mu (pending changes)
//	                                                                     → drainQueue.mu
//	Engine.own → feed.mu (view, history) → Watcher.mu
//
// A function whose name ends in Locked is called with the lock its doc
// comment names held (its receiver's mu unless the comment names another:
// "en.mu held", "e.own held"); it never takes that lock, and takes only
// locks after it in the order above (the comment says which). One that
// needs no lock held has no such suffix.
//
// The follow loop publishes, and runs the callbacks waiting for a
// revision (feed.whenReached), with Engine.own held: such a callback must
// not take it. pool.mu is a leaf taken to start a run. A wheel
// driver calls dispatch (executor.mu for reading, then the pool) and timer
// functions (drains: drainQueue.mu) with no wheel lock held. The committer
// writes to the store with committer.mu released (it publishes nothing:
// the follow loop does), and no entry.mu is held while feed.mu is.
// entry.mu is never taken while another entry's is held.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine/feature"
	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/engine/wheel"
)

// Defaults of Options.
const (
	DefaultHistory      = 100_000
	DefaultHistoryBytes = 64 << 20
	DefaultWatchBuffer  = 10_000
	DefaultMaxInflight  = 100_000
	// DefaultMaxUnwritten is Options.MaxUnwritten's default: about a
	// second of etcd's transactions (63 changes each), enough to ride
	// out an etcd leader election without slowing a probe.
	DefaultMaxUnwritten = 4096
	// DefaultWatchBufferBytes and DefaultWatchTotalBytes bound the bytes
	// of events pending in one watcher and in all (watch.go).
	DefaultWatchBufferBytes = 16 << 20
	DefaultWatchTotalBytes  = 128 << 20
	// DefaultCommitsInFlight is Options.CommitsInFlight's default.
	DefaultCommitsInFlight = 4
)

// Options configure an Engine. Store and Checkers are required.
type Options struct {
	Clock    clockwork.Clock // default: the real clock
	Store    Store
	Checkers Checkers
	Observer Observer // default: NopObserver
	Logger   *slog.Logger

	Gates      feature.Gates
	MinPeriod  time.Duration // floor of effective periods; default 100ms
	MinTimeout time.Duration // floor of effective timeouts; default 100ms
	AllowExec  bool

	History      int // events retained; default 100,000
	HistoryBytes int // bytes retained (estimated); default 64 MiB
	WatchBuffer  int // live events a watcher may have pending; default 10,000
	// MaxTargets limits the targets; 0: no limit. Over a LimitedStore
	// (etcd) both limits hold for every replica at once.
	MaxTargets int
	// MaxTargetsPerClient limits the targets one client identity (see
	// WithClient) may have; 0: no limit.
	MaxTargetsPerClient int
	// Admit, when set, adds checks to the validation of a created or
	// updated target (e.g. the server's target address policy).
	Admit       func(spec *target.Spec) field.List
	MaxInflight int // probes running at once; default 100,000
	// MaxUnwritten bounds the probe transitions queued for the store: past
	// it, a probe whose last transition is not yet written skips its due
	// runs (counted, reason "write") until it is, so a store slower than
	// the probes (targets flapping faster than etcd takes transactions)
	// slows those probes rather than growing the queue without bound.
	// Below it probes never wait for the store: a short stall (an etcd
	// election) loses no transition. Default DefaultMaxUnwritten.
	MaxUnwritten int
	// MaxWatchers limits the watchers open at once; beyond it Watch fails
	// with ErrResourceExhausted. 0: no limit.
	MaxWatchers int
	// MaxWatchersPerClient limits the watchers one client identity (see
	// WithClient) may have open at once, so that one client cannot take
	// every MaxWatchers slot; beyond it Watch fails with
	// ErrResourceExhausted. Watchers without an identity are not counted.
	// 0: no limit.
	MaxWatchersPerClient int
	// OnStoreError, when set, is called when the store stops being able
	// to write for now (with its error, which wraps ErrUnavailable) and
	// when it writes again (nil); see StoreError. It is called from the
	// committer's goroutine: it must not block.
	OnStoreError func(err error)
	// MayProbe, when set, is asked before due runs start (each batch the
	// timer wheel hands out, and a probe's first run): false skips them
	// (counted, reason "lease"). Cluster mode passes whether the
	// replica's lease is still valid by its local deadline, so that a
	// replica waking from a pause knows its lease is over before it
	// probes, whichever of its goroutines runs first. nil: always.
	MayProbe func() bool

	// WatchBufferBytes and WatchTotalBytes bound the estimated bytes of
	// events pending in one watcher (default 16 MiB) and in all of them
	// (default 128 MiB; beyond it the slowest watchers are ended); -1: no
	// bound.
	WatchBufferBytes, WatchTotalBytes int

	// CommitsInFlight is the most batches written to a PipelinedStore
	// (etcd) at once: batch N+1 goes to the store while N is in flight;
	// default DefaultCommitsInFlight, at most the store's own
	// CommitsInFlight; 1: one at a time. Over any other store (bbolt, where
	// a Commit is an fsync and writers are serialised anyway) one batch is
	// written at a time.
	CommitsInFlight int

	Tick   time.Duration // timer wheel tick; default 1ms
	Shards int           // timer wheel shards; default GOMAXPROCS
}

func (o *Options) setDefaults() error {
	if o.Store == nil {
		return errors.New("engine: Options.Store is required")
	}
	if o.Checkers == nil {
		return errors.New("engine: Options.Checkers is required")
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Observer == nil {
		o.Observer = NopObserver{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MinPeriod == 0 {
		o.MinPeriod = probe.DefaultMinPeriod
	}
	if o.MinTimeout == 0 {
		o.MinTimeout = probe.DefaultMinTimeout
	}
	if o.History <= 0 {
		o.History = DefaultHistory
	}
	if o.HistoryBytes == 0 {
		o.HistoryBytes = DefaultHistoryBytes
	}
	if o.WatchBuffer <= 0 {
		o.WatchBuffer = DefaultWatchBuffer
	}
	o.WatchBufferBytes = defaultBound(o.WatchBufferBytes, DefaultWatchBufferBytes)
	o.WatchTotalBytes = defaultBound(o.WatchTotalBytes, DefaultWatchTotalBytes)
	if o.MaxInflight <= 0 {
		o.MaxInflight = DefaultMaxInflight
	}
	if o.MaxUnwritten <= 0 {
		o.MaxUnwritten = DefaultMaxUnwritten
	}
	if o.CommitsInFlight <= 0 {
		o.CommitsInFlight = DefaultCommitsInFlight
	}
	if o.Tick <= 0 {
		o.Tick = time.Millisecond
	}
	if o.Shards <= 0 {
		o.Shards = runtime.GOMAXPROCS(0)
	}
	return nil
}

// Engine probes targets and publishes what it finds. Create it with Open,
// then call Run; every other method waits until Run has started.
type Engine struct {
	opts  Options
	clock clockwork.Clock
	log   *slog.Logger
	obs   Observer

	feed    *feed
	commits *committer
	exec    *executor
	drains  drainQueue
	// presence, when the store is one, vouches for a NotFound (absence.go).
	presence PresenceReader
	// journal, when the store keeps applies, is it (journal.go).
	journal ApplyJournal
	// position is the store's revision when it was loaded: the follow
	// loop starts after it.
	position uint64

	// own orders every change of which targets the engine probes: the
	// follow loop's application of each delivery of the store's log (its
	// registry changes and its ownership), Release and Keep (own.go).
	// Taken before mu.
	own sync.Mutex
	// owned is the store's ownership as of the last delivery applied;
	// guarded by own.
	owned *Ownership
	// releasing[s]: a release of shard s has begun (Release) and neither
	// has the log shown the shard leaving this engine nor has Keep ended
	// it: its targets are not probed, owned or not; guarded by own.
	releasing []bool

	mu        sync.Mutex        // guards targets and perClient
	targets   map[string]*entry // every target not yet removed
	perClient map[string]int    // targets per client identity
	clientIDs map[string]string // the identities of perClient, shared by their targets
	// creating are the names whose create is in flight here
	// (inflight.go).
	creating map[string]*creation // guarded by mu
	// applyMu makes Apply calls run one at a time.
	applyMu sync.Mutex
	// resumes counts, by set, the resumes of an interrupted apply that
	// each left something undone (applyjournal.go); guarded by applyMu.
	resumes map[string]int
	// timings are the runners' effective timings, one copy of each.
	timings timingSet

	// reloads carries Reload's requests to the follow loop.
	reloads chan chan error
	// stall is Stalled's sample of the store's revision.
	stall stallSample

	running chan struct{} // closed when Run has started
	done    chan struct{} // closed when Run is shutting down
	runOnce atomic.Bool
	panics  atomic.Uint64
}

// Open loads the store's state and returns an engine ready to Run.
func Open(ctx context.Context, opts Options) (*Engine, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	e := &Engine{
		opts:      opts,
		clock:     opts.Clock,
		log:       opts.Logger,
		obs:       opts.Observer,
		feed:      newFeed(opts.History, opts.HistoryBytes),
		targets:   make(map[string]*entry),
		perClient: make(map[string]int),
		clientIDs: make(map[string]string),
		creating:  make(map[string]*creation),
		running:   make(chan struct{}),
		done:      make(chan struct{}),
		reloads:   make(chan chan error),
	}
	e.presence, _ = opts.Store.(PresenceReader)
	if j, ok := opts.Store.(ApplyJournal); ok && j.Journals() {
		e.journal = j
	}
	if ls, ok := opts.Store.(LimitedStore); ok {
		ls.EnforceLimits(opts.MaxTargets, opts.MaxTargetsPerClient)
	}
	e.commits = newCommitter(opts.Store, e.feed, e.clock, e.observeCommit)
	e.commits.log = e.log
	if p, ok := opts.Store.(PipelinedStore); ok {
		e.commits.inFlight = max(1, min(opts.CommitsInFlight, p.CommitsInFlight()))
	}
	e.commits.onStore = opts.OnStoreError
	e.exec = newExecutor(e.clock, &e.opts, func(ctx context.Context, r *runner, gen uint64) { e.step(ctx, r, gen) })
	e.feed.onEvict = e.obs.WatcherEvicted
	e.feed.maxWatchers, e.feed.maxWatchersPerClient = opts.MaxWatchers, opts.MaxWatchersPerClient
	e.feed.watcherBytes, e.feed.totalBytes = opts.WatchBufferBytes, opts.WatchTotalBytes
	e.feed.effective = e.effective
	e.drains.init()
	start := e.clock.Now()
	stored, err := opts.Store.Load(ctx)
	if err != nil {
		return nil, err
	}
	restored := e.feed.restore(stored)
	e.position = stored.Revision
	e.owned = stored.Ownership
	if e.owned == nil {
		e.owned = everything
	}
	e.releasing = make([]bool, len(e.owned.Owned))
	for _, r := range restored {
		e.restore(r)
	}
	e.log.Info("state restored", "targets", len(stored.Targets), "events", len(stored.Events),
		"revision", stored.Revision, "took", e.clock.Since(start))
	return e, nil
}

// Run probes until ctx is done, then stops: the scheduler and the probes
// in flight first (every run has ended), then the drains and the follow
// loop, and last the committer, which flushes what is pending (durable,
// and acknowledged when Run returns, but no longer published: every
// watcher ends then). Every goroutine Run started
// has returned when it returns. It returns nil after ctx is done, or the
// store error that stopped it.
func (e *Engine) Run(ctx context.Context) error {
	if !e.runOnce.CompareAndSwap(false, true) {
		return errors.New("engine: Run called twice")
	}
	var workWG, commitWG sync.WaitGroup
	probeCtx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	e.exec.begin(probeCtx)

	commitCtx, stopCommits := context.WithCancel(context.Background())
	defer stopCommits()
	commitErr := make(chan error, 1)
	commitWG.Go(func() {
		commitErr <- e.commits.run(commitCtx)
	})

	// The restored targets the store says are the engine's are probed
	// before the follow loop applies anything after them.
	e.ownAll()
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	workWG.Go(func() { e.drainLoop(workCtx) })
	workWG.Go(func() { e.compactLoop(workCtx) })
	followErr := make(chan error, 1)
	workWG.Go(func() { followErr <- e.follow(workCtx, e.position) })
	close(e.running)

	var err error
	select {
	case <-ctx.Done():
	case err = <-commitErr:
		e.log.Error("store failed; stopping the engine", "err", err)
	case err = <-followErr:
		if err == nil {
			break
		}
		e.log.Error("the view cannot follow the store; stopping the engine", "err", err)
	}
	close(e.done)
	stopProbes()
	e.exec.shutdown()
	stopWork()
	workWG.Wait()
	stopCommits()
	commitWG.Wait()
	if err == nil {
		select {
		case err = <-commitErr:
		default:
		}
	}
	e.feed.close(ErrClosed)
	e.closeCheckers()
	return err
}

// Running returns a channel closed once Run has taken every stored target
// in hand: from then on the engine answers calls.
func (e *Engine) Running() <-chan struct{} { return e.running }

// awaitRunning waits until Run has started.
func (e *Engine) awaitRunning(ctx context.Context) error {
	select {
	case <-e.running:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-e.done:
		return ErrClosed
	default:
		return nil
	}
}

// targetOptions are the validation options of this engine.
func (e *Engine) targetOptions() target.Options {
	return target.Options{Gates: e.opts.Gates, MinPeriod: e.opts.MinPeriod, MinTimeout: e.opts.MinTimeout, AllowExec: e.opts.AllowExec}
}

// observeCommit reports durable, published changes to the observer.
func (e *Engine) observeCommit(changes []*Change, took time.Duration) {
	e.obs.Committed(len(changes), took)
	for _, c := range changes {
		e.obs.Published(&c.Event)
		if c.becameReady {
			e.obs.Ready(c.Name, c.readyAfter)
		}
	}
}

// closeCheckers closes every checker; Run calls it once no run is in
// progress.
func (e *Engine) closeCheckers() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, en := range e.targets {
		en.mu.Lock()
		for _, r := range en.runners {
			if r != nil {
				r.replaceCheckerLocked(nil)
			}
		}
		en.mu.Unlock()
	}
}

// Stats are counters of the engine's work, for metrics and benchmarks.
type Stats struct {
	Targets     int
	Terminating int
	Inflight    int64
	// Cancelling: runs cancelled (their timeout passed, or their probe
	// was stopped) whose check has not returned yet. Checkers end soon
	// after their context does; a count that stays up is a checker that
	// does not.
	Cancelling int64
	// SkippedOverlap: due runs skipped because the probe's previous run was
	// still in progress (a slow target, or a trigger).
	SkippedOverlap uint64
	// SkippedBusy: due runs skipped because MaxInflight runs were in
	// progress.
	SkippedBusy uint64
	// SkippedWrite: due runs skipped because the probe's last transition
	// was not yet written: the store is behind the probes (see
	// runner.unwritten).
	SkippedWrite uint64
	// SkippedLease: due runs skipped because Options.MayProbe said the
	// replica's lease is over.
	SkippedLease uint64
	// ScheduleErrors: probes the timer wheel refused to schedule (they do
	// not run; each is logged).
	ScheduleErrors uint64
	Panics         uint64 // checker panics recovered
	Watchers       int
	Revision       uint64
	Commits        uint64 // store transactions
	Changes        uint64 // changes written (group commit: Changes/Commits per transaction)
	// Refused: changes the store refused — fenced writes of targets this
	// replica no longer owns, creates of targets that exist.
	Refused uint64
	// StoreUnavailable: store transactions that failed because the store
	// could not write for now (ErrUnavailable: a full disk); their
	// changes were held and retried.
	StoreUnavailable uint64
	Wheel            wheel.Stats
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	active, terminating := e.feed.counts()
	cs := e.commits.snapshotStats()
	s := Stats{
		Targets:          active + terminating,
		Terminating:      terminating,
		Inflight:         e.exec.inflight.Load(),
		Cancelling:       e.exec.cancelling.Load(),
		SkippedOverlap:   e.exec.skippedOverlap.Load(),
		SkippedBusy:      e.exec.skippedBusy.Load(),
		SkippedWrite:     e.exec.skippedWrite.Load(),
		ScheduleErrors:   e.exec.scheduleErrors.Load(),
		Panics:           e.panics.Load(),
		Revision:         e.feed.revision(),
		Commits:          cs.Commits,
		Changes:          cs.Changes,
		Refused:          cs.Refused,
		StoreUnavailable: cs.Unavailable,
		SkippedLease:     e.exec.skippedLease.Load(),
		Wheel:            e.exec.wheel.Stats(),
	}
	e.feed.mu.Lock()
	s.Watchers = e.feed.watched
	e.feed.mu.Unlock()
	return s
}

// StoreError returns the store's error while it cannot write for now (it
// wraps ErrUnavailable), nil when it writes. Meanwhile the engine goes on
// probing, holds the transitions it must record (unpublished: nothing is
// visible before it is durable) and retries them with back-off, and
// refuses Create, Update, Reset and Delete with that error; the first
// write that succeeds ends it.
func (e *Engine) StoreError() error { return e.commits.unavailable() }

// refuseUnwritable returns an error wrapping ErrUnavailable while the
// store cannot write (StoreError), for calls that would change a target:
// the store's error first, which names the cause (a bbolt store: "no
// space left on the device of the data dir ..."), then what it means.
func (e *Engine) refuseUnwritable() error {
	if err := e.commits.unavailable(); err != nil {
		return fmt.Errorf("%w; creates, updates, resets, deletes and applies are refused until the store can write again", err)
	}
	return nil
}

// Revision returns the last published revision.
func (e *Engine) Revision() uint64 { return e.feed.revision() }

func notFound(name string) error {
	return fmt.Errorf("target %q: %w", name, ErrNotFound)
}
