package engine

import (
	"context"
	"fmt"
	"sync"
)

// CommitLog is the ordered log of a store that has one writer and no log
// of its own (bbolt, memory): its Commit appends each batch once it is
// durable, and its Follow delivers them. The engine publishes only what
// Follow delivers, so a store's own commits become visible through the
// same path as every replica's over etcd, and never before they are
// durable.
//
// It keeps the batches committed since the last Start (the store's Load)
// until they are delivered, for one follower at a time; at most
// maxLogged changes wait: beyond that the oldest batches are dropped and
// a follow from before them fails with ErrCompacted (the engine then
// reloads). The zero value is ready to use.
type CommitLog struct {
	mu      sync.Mutex
	batches []loggedBatch // appended since Start, not yet delivered; guarded by mu
	kept    int           // changes in batches; guarded by mu
	trimmed uint64        // position of the newest batch dropped undelivered; guarded by mu
	started bool          // Start was called; guarded by mu
	changed chan struct{} // closed at the next Append; guarded by mu
}

// maxLogged bounds the changes a CommitLog keeps undelivered.
const maxLogged = 1 << 16

type loggedBatch struct {
	pos     uint64
	changes []*Change
}

// Start makes the log keep what is appended from now on; a store calls it
// when it is loaded (before that nobody follows: nothing is kept).
func (l *CommitLog) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started = true
}

// Append records a durable batch, its revisions set; its position is the
// revision of its last change.
func (l *CommitLog) Append(changes []*Change) {
	if len(changes) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started {
		return
	}
	l.batches = append(l.batches, loggedBatch{pos: changes[len(changes)-1].Event.Revision, changes: changes})
	l.kept += len(changes)
	for l.kept > maxLogged && len(l.batches) > 1 {
		l.trimmed = l.batches[0].pos
		l.kept -= len(l.batches[0].changes)
		l.batches[0] = loggedBatch{}
		l.batches = l.batches[1:]
	}
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// Follow delivers, in order, every batch appended after revision after,
// as Store.Follow does, until ctx is done (nil). The changes are the ones
// the store's Commit was given; the ownership never changes (a store with
// one writer owns every target).
func (l *CommitLog) Follow(ctx context.Context, after uint64, deliver func(Delivery)) error {
	for {
		l.mu.Lock()
		if after < l.trimmed {
			trimmed := l.trimmed
			l.mu.Unlock()
			return fmt.Errorf("commit log: follow from %d, batches up to %d were dropped undelivered: %w", after, trimmed, ErrCompacted)
		}
		todo := l.batches
		l.batches, l.kept = nil, 0
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		// Taken from the log: delivered whole, also when ctx ends meanwhile.
		for _, b := range todo {
			if b.pos > after {
				deliver(Delivery{Pos: b.pos, Changes: b.changes})
				after = b.pos
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}
