// Package engine is probed's domain: it keeps the registered targets, runs
// their probes on a timer wheel, turns raw outcomes into published results
// with Kubernetes' semantics, writes every change durably through a Store
// before publishing it as an Event, and streams events to watchers.
//
// Concurrency: each target has a lock (entry.mu) guarding its spec,
// decided status and probe state. Changes flow through one committer (group
// commit) into the store, then into the feed (published view, history and
// watchers) under the feed's lock. Lock order: Engine.mu → entry.mu →
// committer.mu; the feed's lock is taken only by the committer and
// readers. Every goroutine is started by Run and waited for before Run
// returns.
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

// maxIdleWorkers bounds the probe goroutines kept waiting for work.
const maxIdleWorkers = 256

// Defaults of Options.
const (
	DefaultHistory      = 100_000
	DefaultHistoryBytes = 64 << 20
	DefaultWatchBuffer  = 10_000
	DefaultMaxInflight  = 100_000
	// DefaultWatchBufferBytes and DefaultWatchTotalBytes bound the bytes
	// of events pending in one watcher and in all (watch.go).
	DefaultWatchBufferBytes = 16 << 20
	DefaultWatchTotalBytes  = 128 << 20
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
	MaxTargets   int // 0: no limit
	// MaxTargetsPerOwner limits the targets one client identity (see
	// WithOwner) may have; 0: no limit.
	MaxTargetsPerOwner int
	// Admit, when set, adds checks to the validation of a created or
	// updated target (e.g. the server's target address policy).
	Admit       func(spec *target.Spec) field.List
	MaxInflight int // probes running at once; default 100,000
	// MaxWatchers limits the watchers open at once; beyond it Watch fails
	// with ErrResourceExhausted. 0: no limit.
	MaxWatchers int

	// WatchBufferBytes and WatchTotalBytes bound the estimated bytes of
	// events pending in one watcher (default 16 MiB) and in all of them
	// (default 128 MiB; beyond it the slowest watchers are ended); -1: no
	// bound.
	WatchBufferBytes, WatchTotalBytes int

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
	drains  drainQueue

	mu      sync.Mutex        // guards targets and owned
	targets map[string]*entry // every target not yet removed
	owned   map[string]int    // targets per owner

	slotsMu sync.RWMutex // guards slots and free
	slots   []*runner    // by wheel.ID
	free    []wheel.ID

	wheel *wheel.Wheel // set by Run before running is closed
	// pool runs probes under Run's probe context. Set by Run before running
	// is closed.
	pool     *pool
	running  chan struct{} // closed when Run has started
	done     chan struct{} // closed when Run is shutting down
	runOnce  atomic.Bool
	inflight atomic.Int64
	probes   sync.WaitGroup // probe executions started by dispatch

	skippedOverlap atomic.Uint64 // due while still running (trigger)
	skippedBusy    atomic.Uint64 // MaxInflight reached
	panics         atomic.Uint64
}

// Open loads the store's state and returns an engine ready to Run.
func Open(ctx context.Context, opts Options) (*Engine, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	e := &Engine{
		opts:    opts,
		clock:   opts.Clock,
		log:     opts.Logger,
		obs:     opts.Observer,
		feed:    newFeed(opts.History, opts.HistoryBytes),
		targets: make(map[string]*entry),
		owned:   make(map[string]int),
		running: make(chan struct{}),
		done:    make(chan struct{}),
	}
	e.commits = newCommitter(opts.Store, e.feed, e.clock, e.observeCommit, e.lose)
	e.feed.onEvict = e.obs.WatcherEvicted
	e.feed.maxWatchers = opts.MaxWatchers
	e.feed.watcherBytes, e.feed.totalBytes = opts.WatchBufferBytes, opts.WatchTotalBytes
	e.drains.init()
	start := e.clock.Now()
	stored, err := opts.Store.Load(ctx)
	if err != nil {
		return nil, err
	}
	e.feed.restore(stored)
	for _, t := range stored.Targets {
		e.restore(t)
	}
	e.log.Info("state restored", "targets", len(stored.Targets), "events", len(stored.Events),
		"revision", stored.Revision, "took", e.clock.Since(start))
	return e, nil
}

// Run probes until ctx is done, then stops: the scheduler first, then the
// probes in flight, the drains, and last the committer, which flushes what
// is pending. Every goroutine Run started has returned when it returns.
// It returns nil after ctx is done, or the store error that stopped it.
func (e *Engine) Run(ctx context.Context) error {
	if !e.runOnce.CompareAndSwap(false, true) {
		return errors.New("engine: Run called twice")
	}
	probeCtx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	e.pool = newPool(maxIdleWorkers, func(j job) { e.execute(probeCtx, j.r, j.gen) })
	e.wheel = wheel.New(e.clock, e.dispatch, wheel.WithTick(e.opts.Tick), wheel.WithShards(e.opts.Shards))

	var wheelWG, workWG, commitWG sync.WaitGroup
	wheelCtx, stopWheel := context.WithCancel(context.Background())
	defer stopWheel()
	wheelWG.Go(func() {
		if err := e.wheel.Run(wheelCtx); err != nil {
			e.log.Error("timer wheel stopped", "err", err)
		}
	})

	commitCtx, stopCommits := context.WithCancel(context.Background())
	defer stopCommits()
	commitErr := make(chan error, 1)
	commitWG.Go(func() {
		commitErr <- e.commits.run(commitCtx)
	})

	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	workWG.Go(func() { e.drainLoop(workCtx) })
	workWG.Go(func() { e.compactLoop(workCtx) })

	e.startRestored()
	close(e.running)

	var err error
	select {
	case <-ctx.Done():
	case err = <-commitErr:
		e.log.Error("store failed; stopping the engine", "err", err)
	}
	close(e.done)
	stopWheel()
	wheelWG.Wait()
	stopProbes()
	e.probes.Wait()
	e.pool.close()
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

func (e *Engine) observeCommit(changes []*Change, took time.Duration) {
	e.obs.Committed(len(changes), took)
	for _, c := range changes {
		e.obs.Published(&c.Event)
	}
}

// lose stops probing targets whose ownership the store says was lost.
func (e *Engine) lose(names []string) {
	for _, name := range names {
		e.mu.Lock()
		en := e.targets[name]
		delete(e.targets, name)
		if en != nil {
			e.countOwnedLocked(en.status.Owner, -1)
		}
		e.mu.Unlock()
		e.feed.forget(name)
		if en == nil {
			continue
		}
		en.mu.Lock()
		e.retireLocked(en)
		en.mu.Unlock()
		e.log.Warn("ownership of target lost; stopped probing it", "target", name)
	}
}

func (e *Engine) closeCheckers() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, en := range e.targets {
		en.mu.Lock()
		for _, r := range en.runners {
			if r != nil && r.checker != nil {
				r.checker.Close()
				r.checker = nil
			}
		}
		en.mu.Unlock()
	}
}

// Stats are counters of the engine's work, for metrics and benchmarks.
type Stats struct {
	Targets        int
	Terminating    int
	Inflight       int64
	SkippedOverlap uint64 // a fire found the probe still running (e.g. a trigger)
	SkippedBusy    uint64 // a fire found MaxInflight probes running
	Panics         uint64 // checker panics recovered
	Watchers       int
	Revision       uint64
	Commits        uint64 // store transactions
	Changes        uint64 // changes written (group commit: Changes/Commits per transaction)
	Wheel          wheel.Stats
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	active, terminating := e.feed.counts()
	cs := e.commits.snapshotStats()
	s := Stats{
		Targets:        active + terminating,
		Terminating:    terminating,
		Inflight:       e.inflight.Load(),
		SkippedOverlap: e.skippedOverlap.Load(),
		SkippedBusy:    e.skippedBusy.Load(),
		Panics:         e.panics.Load(),
		Revision:       e.feed.revision(),
		Commits:        cs.Commits,
		Changes:        cs.Changes,
	}
	e.feed.mu.Lock()
	s.Watchers = e.feed.watched
	e.feed.mu.Unlock()
	select {
	case <-e.running:
		s.Wheel = e.wheel.Stats()
	default:
	}
	return s
}

// Revision returns the last published revision.
func (e *Engine) Revision() uint64 { return e.feed.revision() }

func notFound(name string) error {
	return fmt.Errorf("target %q: %w", name, ErrNotFound)
}
