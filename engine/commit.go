package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// committer serialises every change through the store: it takes what is
// pending (group commit: one transaction and one fsync for a burst, up to
// the store's MaxBatch changes, never splitting a unit) and writes it. It
// only writes: the engine's follow loop publishes what the store's Follow
// delivers (follow.go), durable by then, in the store's order, and the
// waiters of a batch are told once the feed has reached it.
//
// Over a PipelinedStore up to inFlight batches are written at once (batch
// N+1 goes to the store while N is in flight): the store orders them, not
// the committer, so no two batches in flight at once have a target in
// common — a unit with a change of a target in flight (or of a unit left
// pending before it) stays pending, in its order, for a later batch, and
// units after it may pass it. The changes of one target are thus written,
// and published, in the order submitted; those of different targets in
// the order the store applied them. Over any other store one batch is in
// flight at a time: the store's order is the order submitted.
type committer struct {
	store    Store
	feed     *feed
	clock    clockwork.Clock
	limits   BatchLimiter                                // nil: no limit
	coster   BatchCoster                                 // nil: every change costs 1
	onCommit func(changes []*Change, took time.Duration) // once durable (when Commit returned)
	// onStore, when set, is told (with no lock held) when the store
	// stops writing for now (an error wrapping ErrUnavailable) and when
	// it writes again (nil).
	onStore func(err error)
	log     *slog.Logger // nil: no log

	mu      sync.Mutex
	pending []pendingChange // guarded by mu
	closed  error           // set once the committer stopped; guarded by mu
	wake    chan struct{}
	stats   commitStats // guarded by mu
	// committed is the revision of the last change committed (what a
	// barrier waits for the feed to reach); guarded by mu.
	committed uint64
	// unwritable is the store's last error wrapping ErrUnavailable while
	// the committer holds changes it could not write, nil otherwise;
	// guarded by mu.
	unwritable error
	// held, while a group is open (group.go), are the changes submitted
	// outside it, queued behind it when it closes; guarded by mu.
	held    []pendingChange
	holding bool
	// inFlight is the most Commits in flight at once (at least 1); set
	// before run.
	inFlight int
	// busy are the targets with a change in a batch in flight; guarded by
	// mu. take leaves their next changes pending.
	busy map[string]struct{}
	// writing is when the oldest Commit in flight began (the clock's Unix
	// nanoseconds), 0 when none is (Stalled).
	writing atomic.Int64
}

// flight is one batch handed to the store, and the outcome of its Commit.
type flight struct {
	batch   []pendingChange
	changes []*Change // the batch's changes (none: only barriers)
	start   time.Time
	err     error
	took    time.Duration
	retry   bool // the retry of held changes
}

// Back-off between retries of changes held because the store could not
// write them (ErrUnavailable): doubling from minHoldRetry up to
// maxHoldRetry, on the engine's clock.
const (
	minHoldRetry = 50 * time.Millisecond
	maxHoldRetry = 2 * time.Second
)

type pendingChange struct {
	change *Change    // nil for a barrier
	done   chan error // nil when nobody waits
	last   bool       // the last change of its unit (submit's changes, or a barrier)
	// bytes is what change weighs against the store's batch limits
	// (BatchLimiter.ChangeBytes), weighed once when submitted; 0 without
	// limits.
	bytes int
	// cost is what change counts against the store's limit of changes
	// (BatchCoster.ChangeCost; 0 counts as 1).
	cost int
}

// units is what p counts against the store's limit of changes.
func (p pendingChange) units() int {
	if p.change == nil {
		return 0
	}
	return max(p.cost, 1)
}

// pendingOf returns ch as a pending change, weighed.
func (c *committer) pendingOf(ch *Change) pendingChange {
	p := pendingChange{change: ch}
	if c.limits != nil {
		p.bytes = c.limits.ChangeBytes(ch)
	}
	if c.coster != nil {
		p.cost = c.coster.ChangeCost(ch)
	}
	return p
}

// commitStats count what the committer did, for metrics and benchmarks.
type commitStats struct {
	Commits uint64 // store transactions
	Changes uint64 // changes written
	Refused uint64 // changes the store refused (a lost ownership, a target that exists)
	// Unavailable: Commits that failed with ErrUnavailable (the store
	// could not write for now); their changes were held and retried.
	Unavailable uint64
}

// BatchLimiter is implemented by a Store whose Commit takes a bounded
// batch (an etcd transaction has at most so many operations and bytes).
// The committer never gives it more — except one submission (the changes
// of one target, which are never split across Commits) that exceeds the
// limits alone, which it gives alone.
type BatchLimiter interface {
	// BatchLimits returns the most changes (of their ChangeCost, with a
	// BatchCoster) and bytes one Commit may take.
	BatchLimits() (changes, bytes int)
	// ChangeBytes is what a change weighs against the bytes limit.
	ChangeBytes(c *Change) int
}

// BatchCoster is implemented by a BatchLimiter some of whose changes take
// more of a Commit than others (over etcd, a create or a removal also
// updates the count of its client's targets: an operation more).
// ChangeCost is what c counts against BatchLimits' changes, at least 1;
// without it every change counts 1.
type BatchCoster interface {
	ChangeCost(c *Change) int
}

func newCommitter(store Store, f *feed, clock clockwork.Clock, onCommit func([]*Change, time.Duration)) *committer {
	c := &committer{store: store, feed: f, clock: clock, onCommit: onCommit, wake: make(chan struct{}, 1),
		inFlight: 1, busy: make(map[string]struct{})}
	c.limits, _ = store.(BatchLimiter)
	c.coster, _ = store.(BatchCoster)
	return c
}

// submit queues changes as one unit (they land in the same transaction)
// and returns a channel that receives the outcome, or nil if wait is false.
func (c *committer) submit(changes []*Change, wait bool) (<-chan error, error) {
	var done chan error
	if wait {
		done = make(chan error, 1)
	}
	c.mu.Lock()
	if c.closed != nil {
		c.mu.Unlock()
		return nil, c.closed
	}
	queue := &c.pending
	if c.holding {
		queue = &c.held
	}
	for i, ch := range changes {
		p := c.pendingOf(ch)
		if i == len(changes)-1 {
			p.done, p.last = done, true
		}
		*queue = append(*queue, p)
	}
	c.mu.Unlock()
	c.signal()
	return done, nil
}

// barrier waits until every change submitted before it is durable and
// published (or failed), or ctx is done.
func (c *committer) barrier(ctx context.Context) error {
	done := make(chan error, 1)
	c.mu.Lock()
	if err := c.closed; err != nil {
		// Stopped: nothing is pending any more; a store failure is the
		// answer to what was.
		c.mu.Unlock()
		if errors.Is(err, ErrClosed) {
			return nil
		}
		return err
	}
	if c.holding {
		c.held = append(c.held, pendingChange{done: done, last: true})
	} else {
		c.pending = append(c.pending, pendingChange{done: done, last: true})
	}
	c.mu.Unlock()
	c.signal()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *committer) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// notify tells the waiters of batch the outcome.
func notify(batch []pendingChange, err error) {
	for _, p := range batch {
		p.notify(err)
	}
}

// notify tells p's waiter and its change's written hook the outcome.
func (p pendingChange) notify(err error) {
	if p.done != nil {
		p.done <- err
	}
	if p.change != nil {
		p.change.markWritten()
	}
}

// run writes pending changes until ctx is done, then flushes what is still
// pending and refuses more. A store error wrapping ErrUnavailable holds
// the batch (nothing of it is published, its waiters wait) and retries it
// with back-off, also while flushing on stop (until the store's Close
// ends that): while changes are held no other batch is taken, and the
// held batch is retried alone once nothing else is in flight; the first
// batch written ends the hold. Any other store error but lost ownership
// stops it and is returned, once every batch in flight has ended: the
// engine must not go on with state it cannot persist.
func (c *committer) run(ctx context.Context) error {
	stopping := false
	var failed error
	results := make(chan *flight, c.inFlight)
	var flying []*flight // in the order taken
	// delay is the back-off before retrying held changes (0: none held);
	// retry fires when it has passed (nil: not waiting), and due is set
	// then until the held batch is retried.
	var delay time.Duration
	var retry clockwork.Timer
	due := false
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	// outcome handles a Commit's outcome: it holds the batch (arming
	// the retry) or not, or fails the committer.
	outcome := func(f *flight) {
		held, err := c.written(f)
		switch {
		case err != nil:
			if failed == nil {
				failed = err
			}
		case held:
			if delay == 0 || f.retry {
				// The first failure, or the retry failed again: back
				// off further. (Batches in flight before the first
				// failure that fail too are held with it.)
				delay = min(max(2*delay, minHoldRetry), maxHoldRetry)
				if retry != nil {
					retry.Stop()
				}
				retry, due = c.clock.NewTimer(delay), false
			}
		case len(f.changes) > 0 && delay > 0:
			// The store wrote: what it held goes out again now.
			delay, due = 0, false
			if retry != nil {
				retry.Stop()
				retry = nil
			}
			c.signal()
		}
	}
	for {
		if !stopping && ctx.Err() != nil {
			stopping = true
			c.mu.Lock()
			if c.closed == nil {
				c.closed = ErrClosed
			}
			c.mu.Unlock()
		}
		// Hand the store what may go: up to inFlight batches, or, while
		// changes are held, the retry alone once it is due and nothing
		// else is in flight. The flush on stop must not be cancelled with
		// ctx (only by the store's Close, which bounds a shutdown).
		for failed == nil && len(flying) < c.inFlight && (delay == 0 || due && len(flying) == 0) {
			batch := c.take(len(flying) == 0)
			if len(batch) == 0 {
				break
			}
			f := c.begin(batch)
			if f == nil {
				continue // only barriers: told without the store
			}
			f.retry, due = delay > 0, false
			if c.inFlight == 1 {
				// One at a time: written here, as before pipelining.
				c.writing.Store(f.start.UnixNano())
				c.commit(context.WithoutCancel(ctx), f)
				c.writing.Store(0)
				outcome(f)
				continue
			}
			flying = append(flying, f)
			go func() {
				c.commit(context.WithoutCancel(ctx), f)
				results <- f
			}()
		}
		c.markWriting(flying)
		if len(flying) == 0 {
			if failed != nil {
				return failed
			}
			if stopping && delay == 0 && c.idle() {
				return nil
			}
		}
		wake, done := c.wake, ctx.Done()
		if stopping {
			done = nil
		}
		var retried <-chan time.Time
		if retry != nil {
			retried = retry.Chan()
		}
		select {
		case <-wake:
		case <-retried:
			retry, due = nil, true
		case <-done:
		case f := <-results:
			flying = slices.DeleteFunc(flying, func(g *flight) bool { return g == f })
			outcome(f)
		}
	}
}

// idle reports whether nothing is pending.
func (c *committer) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) == 0
}

// markWriting records when the oldest Commit in flight began (Stalled).
func (c *committer) markWriting(flying []*flight) {
	if len(flying) == 0 {
		c.writing.Store(0)
		return
	}
	c.writing.Store(flying[0].start.UnixNano())
}

// pendingNow returns a copy of what is pending.
func (c *committer) pendingNow() []pendingChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.pending)
}

// logUnwritten says which changes the store failed to write, for good
// (the committer stops): how many of each kind, and the targets (the
// first 20 names).
func (c *committer) logUnwritten(lost []pendingChange, err error) {
	if c.log == nil {
		return
	}
	kinds := make(map[EventKind]int)
	var names []string
	seen := make(map[string]bool)
	n := 0
	for _, p := range lost {
		if p.change == nil {
			continue
		}
		n++
		kinds[p.change.Event.Kind]++
		if !seen[p.change.Name] {
			seen[p.change.Name] = true
			names = append(names, p.change.Name)
		}
	}
	if n == 0 {
		return
	}
	var byKind []string
	for k, m := range kinds {
		byKind = append(byKind, fmt.Sprintf("%s=%d", strings.ToLower(k.String()), m))
	}
	slices.Sort(byKind)
	shown := names
	if len(shown) > 20 {
		shown = shown[:20]
	}
	c.log.Error("changes not written to the store; they are lost",
		"changes", n, "kinds", strings.Join(byKind, ","), "targets", len(names), "names", strings.Join(shown, ","), "err", err)
}

// take removes and returns what is pending, whole units of it, within the
// store's batch limits (a unit over them alone): the units of targets with
// no change in flight (busy) nor in a unit it leaves pending, which it
// marks busy until their Commit ends. A barrier (a unit with no change)
// is taken only when idle (no batch in flight) and with every unit before
// it; otherwise it and every unit after it stay pending. Unless idle it
// takes only a full batch (the next unit would exceed the limits): what
// is pending meanwhile waits to fill one, so batches stay as large as
// with one Commit at a time and more go to the store only when more is
// pending than one batch takes.
func (c *committer) take(idle bool) []pendingChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	maxChanges, maxBytes := 0, 0
	if c.limits != nil {
		maxChanges, maxBytes = c.limits.BatchLimits()
	}
	if !idle && !c.fillsLocked(maxChanges, maxBytes) {
		return nil // the cheap check, made at every submit
	}
	var batch, left []pendingChange
	var skipped map[string]struct{} // targets of the units left pending
	changes, bytes := 0, 0
	full := false
	i := 0
	for i < len(c.pending) {
		j := i
		for j < len(c.pending)-1 && !c.pending[j].last {
			j++
		}
		unit := c.pending[i : j+1]
		barrier, conflict := true, false
		unitChanges, unitBytes := 0, 0
		for _, p := range unit {
			if p.change == nil {
				continue
			}
			barrier = false
			unitChanges += p.units()
			unitBytes += p.bytes
			_, inFlight := c.busy[p.change.Name]
			_, behind := skipped[p.change.Name]
			conflict = conflict || inFlight || behind
		}
		if barrier && (!idle || len(left) > 0) {
			break
		}
		if conflict {
			if skipped == nil {
				skipped = make(map[string]struct{})
			}
			for _, p := range unit {
				if p.change != nil {
					skipped[p.change.Name] = struct{}{}
				}
			}
			left = append(left, unit...)
			i = j + 1
			continue
		}
		if c.limits != nil && len(batch) > 0 && (changes+unitChanges > maxChanges || bytes+unitBytes > maxBytes) {
			full = true
			break
		}
		batch = append(batch, unit...)
		changes, bytes = changes+unitChanges, bytes+unitBytes
		i = j + 1
	}
	full = full || c.limits != nil && changes >= maxChanges
	if len(batch) == 0 || !idle && !full {
		return nil
	}
	for _, p := range batch {
		if p.change != nil {
			c.busy[p.change.Name] = struct{}{}
		}
	}
	c.pending = append(left, c.pending[i:]...)
	if len(c.pending) == 0 {
		c.pending = nil
	}
	return batch
}

// fillsLocked reports whether what is pending, busy targets or not,
// exceeds a batch of the store's limits (false without limits); c.mu
// held. It reads at most a batch's worth of it.
func (c *committer) fillsLocked(maxChanges, maxBytes int) bool {
	if c.limits == nil {
		return false
	}
	changes, bytes := 0, 0
	for _, p := range c.pending {
		if p.change != nil {
			changes, bytes = changes+p.units(), bytes+p.bytes
		}
		if changes >= maxChanges || bytes > maxBytes {
			return true
		}
	}
	return false
}

// releaseLocked ends batch's hold on its targets (take), once its Commit
// ended; c.mu held.
func (c *committer) releaseLocked(batch []pendingChange) {
	for _, p := range batch {
		if p.change != nil {
			delete(c.busy, p.change.Name)
		}
	}
}

// begin prepares batch's Commit, or, when it holds only barriers, tells
// them once the feed has reached what was committed (take gives a barrier
// only when no batch is in flight) and returns nil.
func (c *committer) begin(batch []pendingChange) *flight {
	changes := make([]*Change, 0, len(batch))
	for _, p := range batch {
		if p.change != nil {
			changes = append(changes, p.change)
		}
	}
	if len(changes) == 0 {
		c.mu.Lock()
		committed := c.committed
		c.mu.Unlock()
		c.feed.whenReached(committed, func() { notify(batch, nil) })
		return nil
	}
	return &flight{batch: batch, changes: changes, start: c.clock.Now()}
}

// commit writes f's changes: the store's Commit, its outcome in f.
func (c *committer) commit(ctx context.Context, f *flight) {
	f.err = c.store.Commit(ctx, f.changes)
	f.took = c.clock.Since(f.start)
}

// written handles the outcome of f's Commit; its waiters are told once
// the follow loop has published it. Changes the store refused as
// conflicting (a write the store fenced off, a target that exists) are
// dropped, their waiters get the reason, and the others are queued again;
// a batch the store could not write for now (ErrUnavailable) is queued
// again whole and held is true; any other store error is returned.
func (c *committer) written(f *flight) (held bool, err error) {
	batch, changes := f.batch, f.changes
	if err := f.err; err != nil {
		if errors.Is(err, ErrUnavailable) {
			c.hold(batch, err)
			return true, nil
		}
		return false, c.refused(batch, err)
	}
	c.mu.Lock()
	c.releaseLocked(batch)
	c.mu.Unlock()
	c.writable()
	for _, ch := range changes {
		if ch.entry != nil && ch.Target != nil {
			ch.entry.adopt(ch)
		}
	}
	last := changes[len(changes)-1].Event.Revision
	c.mu.Lock()
	c.stats.Commits++
	c.stats.Changes += uint64(len(changes))
	c.committed = max(c.committed, last)
	c.mu.Unlock()
	// Observed once durable; the follow loop may have published the
	// changes already (the store's log delivers them when it has them),
	// so the metrics may lag an event by a moment.
	c.onCommit(changes, f.took)
	// Written hooks run once durable (a probe held behind its unwritten
	// transition runs again), unless the follow loop ran them already,
	// before it published the changes.
	for _, ch := range changes {
		ch.markWritten()
	}
	c.feed.whenReached(last, func() { notify(batch, nil) })
	return false, nil
}

// hold queues batch again, before what is pending, after the store failed
// to write it with err (wrapping ErrUnavailable): nothing of it is
// published and its waiters wait. What is pending of its targets was left
// behind it (take), so it stays behind it. The first failure logs and tells
// onStore.
func (c *committer) hold(batch []pendingChange, err error) {
	c.mu.Lock()
	c.releaseLocked(batch)
	c.pending = append(batch, c.pending...)
	c.stats.Unavailable++
	first := c.unwritable == nil
	c.unwritable = err
	held := len(c.pending)
	c.mu.Unlock()
	if !first {
		return
	}
	if c.log != nil {
		c.log.Error("the store cannot write; holding changes, refusing creates, updates and deletes, and retrying",
			"held", held, "err", err)
	}
	if c.onStore != nil {
		c.onStore(err)
	}
}

// writable records that the store wrote; if it had failed with
// ErrUnavailable, that is over: logged and told to onStore.
func (c *committer) writable() {
	c.mu.Lock()
	was := c.unwritable
	c.unwritable = nil
	failed := c.stats.Unavailable
	c.mu.Unlock()
	if was == nil {
		return
	}
	if c.log != nil {
		c.log.Info("the store writes again; held changes are being written", "failed_commits", failed)
	}
	if c.onStore != nil {
		c.onStore(nil)
	}
}

// unavailable returns the store's error while it cannot write for now
// (wrapping ErrUnavailable), nil when it can.
func (c *committer) unavailable() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unwritable
}

// failure is what the waiters of a batch the store failed to write are
// told: err, which also wraps ErrClosed once the committer is stopping (a
// held batch whose retries the store's Close ended is lost to a shutdown,
// which the client may retry elsewhere or later).
func (c *committer) failure(err error) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed != nil && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w: %w", closed, err)
	}
	return err
}

// refused handles a Commit that failed with err (nothing was written).
func (c *committer) refused(batch []pendingChange, err error) error {
	reasons := make(map[string]error)
	var lost *OwnershipLostError
	var conflict *ConflictError
	switch {
	case errors.As(err, &lost):
		for _, n := range lost.Names {
			reasons[n] = err
		}
	case errors.As(err, &conflict):
		maps.Copy(reasons, conflict.Refused)
	default:
		c.logUnwritten(append(batch, c.pendingNow()...), err)
		notify(batch, c.failure(err))
		c.fail(err)
		return err
	}
	// A write fenced off (ErrOwnershipLost) needs nothing more: the
	// store's log brings the loss of its shard, which stops the target's
	// probes (own.go). Released with the retry queued below, under one
	// lock: what is pending of the batch's targets stays behind the retry.
	var retry []pendingChange
	for _, p := range batch {
		if p.change == nil {
			retry = append(retry, p)
			continue
		}
		if why, ok := reasons[p.change.Name]; ok {
			c.mu.Lock()
			c.stats.Refused++
			c.mu.Unlock()
			p.notify(why)
			continue
		}
		retry = append(retry, p)
	}
	if len(retry) == len(batch) {
		// None of the batch was dropped: writing it again would be
		// refused again, forever.
		c.logUnwritten(append(batch, c.pendingNow()...), err)
		notify(batch, err)
		c.fail(err)
		return err
	}
	c.mu.Lock()
	c.releaseLocked(batch)
	c.pending = append(retry, c.pending...)
	c.mu.Unlock()
	if len(retry) > 0 {
		c.signal()
	}
	return nil
}

// fail refuses further changes and fails everything pending with err.
func (c *committer) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = err
	for _, p := range c.pending {
		p.notify(err)
	}
	for _, p := range c.held {
		p.notify(err)
	}
	c.pending, c.held = nil, nil
}

func (c *committer) snapshotStats() commitStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}
