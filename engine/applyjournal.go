package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// applyJournaledLocked is Apply over an ApplyJournal; applyMu held. An
// apply that changes nothing, of a set with no apply recorded, writes
// nothing. Otherwise it takes the set's lock and records the set
// (BeginApply; a resumed apply holds both already), waits until the view
// holds what was written under the lock before, plans again from there,
// and applies the plan; the record is forgotten once the apply ended,
// unless it was cut short by something that passes (the replica
// stopping, the store unable to write, the lock lost): a replica, this
// one or another, then finishes it (ResumeApply).
func (e *Engine) applyJournaledLocked(ctx context.Context, set ApplySet) (*ApplyResult, error) {
	t := set.ticket
	if t == nil {
		begun, err := e.journal.ApplyBegun(ctx, set.Owner)
		if err != nil {
			return nil, err
		}
		if !begun {
			p, errs := e.plan(set)
			if err := errs.Err(); err != nil {
				return nil, err
			}
			if p.empty() {
				res := p.result(set)
				res.Revision = e.feed.revision()
				return res, nil
			}
		}
		if err := e.refuseUnwritable(); err != nil {
			return nil, err
		}
		rec := &ApplyRecord{Owner: set.Owner, Selector: set.Selector, Client: ClientFrom(ctx), Targets: set.Targets}
		got, err := e.journal.BeginApply(ctx, rec)
		if err != nil {
			return nil, err
		}
		t = &got
	}
	// Recorded: the apply runs to its end whether or not its caller
	// waits, until the engine stops.
	ctx, cancel := e.detach(ctx)
	defer cancel()
	res, err := e.applyRecorded(ctx, set, t)
	// Left incomplete (updates or prunes undone: a forward that found a
	// shard changing hands, as right after a death; its prunes withheld
	// until every update is written), the caller's apply as a resumed one
	// stays recorded, to be resumed.
	if interrupted(err) || res != nil && res.incomplete && e.resumeAgainLocked(set.Owner) {
		return res, err
	}
	delete(e.resumes, set.Owner)
	if eerr := e.journal.EndApply(ctx, *t); eerr != nil {
		e.log.Warn("an apply ended but its record could not be removed; another replica will apply it again", "owner", set.Owner, "err", eerr)
	}
	return res, err
}

// maxResumes bounds the resumes of one apply by one replica that each
// leave updates or prunes undone: a failure that does not pass (a
// forwarded call refused) must not be retried for ever.
const maxResumes = 20

// resumeAgainLocked reports whether an apply of owner (the caller's or a
// resumed one) that left updates or prunes undone (forwarded to a
// replica whose shard was changing hands, as when the one that began it
// died) is to be resumed again, its record kept; applyMu held.
func (e *Engine) resumeAgainLocked(owner string) bool {
	if e.resumes == nil {
		e.resumes = make(map[string]int)
	}
	e.resumes[owner]++
	if e.resumes[owner] > maxResumes {
		e.log.Error("an interrupted apply left updates or prunes undone each time it was resumed; giving up (the next apply of the set finishes it)",
			"owner", owner, "resumes", maxResumes)
		return false
	}
	return true
}

// applySync bounds the wait of a recorded apply for its view to hold
// what was written under the set's lock before, on the engine's clock: a
// view that does not get there is stalled (the replica loses its lease
// for it), and the apply is left to be resumed.
const applySync = 30 * time.Second

// errViewBehind is the cause of a wait for the view cut by applySync.
var errViewBehind = errors.New("the view did not reach what was written under the set's lock")

// applyRecorded plans set and applies it, holding t.
func (e *Engine) applyRecorded(ctx context.Context, set ApplySet, t *ApplyTicket) (*ApplyResult, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	timer := e.clock.AfterFunc(applySync, func() { cancel(errViewBehind) })
	err := e.Sync(sctx, t.Position)
	timer.Stop()
	cancel(nil)
	if err != nil {
		if errors.Is(context.Cause(sctx), errViewBehind) {
			return nil, fmt.Errorf("apply of %q: %w within %v: %w", set.Owner, errViewBehind, applySync, ErrSuspended)
		}
		return nil, err
	}
	p, errs := e.plan(set)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	res := p.result(set)
	if p.empty() {
		res.Revision = e.feed.revision()
		return res, nil
	}
	if err := e.refuseUnwritable(); err != nil {
		return nil, err
	}
	return res, e.applyShared(ctx, set, p, res, t)
}

// interrupted reports whether an apply that failed with err is to be
// finished later (its record kept): err passes by itself.
func interrupted(err error) bool {
	for _, passing := range []error{ErrAborted, ErrClosed, ErrUnavailable, ErrSuspended, ErrOwnershipLost, ErrNotOwned, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, passing) {
			return true
		}
	}
	return false
}

// detach returns a context with ctx's values that ends only when the
// engine stops (or when the returned cancel is called).
func (e *Engine) detach(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-e.done:
			cancel()
		case <-stop:
		}
	}()
	return ctx, func() {
		close(stop)
		<-exited
		cancel()
	}
}

// InterruptedApplies names the sets whose apply is recorded and no
// replica is running (ApplyJournal.InterruptedApplies); none when the
// store keeps no applies.
func (e *Engine) InterruptedApplies(ctx context.Context) ([]string, error) {
	if e.journal == nil {
		return nil, nil
	}
	if err := e.awaitRunning(ctx); err != nil {
		return nil, err
	}
	return e.journal.InterruptedApplies(ctx)
}

// ResumeApply finishes the recorded apply of owner's set when no replica
// is running it (its replica died or lost its lease in the middle, or it
// stopped on something that passed): it takes the set's lock and applies
// the recorded desired list again, as the recorded caller (its identity
// in ctx, for the limits); prepare sets what the caller's apply had
// (Writable, Forward) from that identity. When prepare refuses the set
// (the caller may no longer write one of its targets, as a new call of
// it would be refused), the apply ends as it stands, nothing more
// written, and ResumeApply returns prepare's error. It returns nil, nil
// when there is nothing to resume (finished, or another replica resumes
// it).
func (e *Engine) ResumeApply(ctx context.Context, owner string, prepare func(set *ApplySet, client string) error) (*ApplyResult, error) {
	if e.journal == nil {
		return nil, nil
	}
	if err := e.awaitRunning(ctx); err != nil {
		return nil, err
	}
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	rec, t, ok, err := e.journal.TakeOverApply(ctx, owner)
	if err != nil || !ok {
		return nil, err
	}
	set := ApplySet{Owner: rec.Owner, Selector: rec.Selector, Targets: rec.Targets, ticket: &t}
	ctx = WithClient(ctx, rec.Client)
	if prepare != nil {
		if err := prepare(&set, rec.Client); err != nil {
			err = fmt.Errorf("the apply of %s by %q ends unfinished: %w", rec.Owner, rec.Client, err)
			if eerr := e.journal.EndApply(ctx, t); eerr != nil {
				return nil, errors.Join(err, eerr)
			}
			return nil, err
		}
	}
	if err := validateSet(set).Err(); err != nil {
		// Recorded after the same check: a record no probed wrote.
		if eerr := e.journal.EndApply(ctx, t); eerr != nil {
			return nil, errors.Join(err, eerr)
		}
		return nil, err
	}
	return e.applyJournaledLocked(ctx, set)
}
