package cluster

import (
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxQueued bounds the revisions Observe queues for Run's goroutine:
// past it the queue is dropped, and the next revision's after (above the
// view's) makes the view reload its keys.
const maxQueued = 1 << 16

// observed is one revision the store's follow saw.
type observed struct {
	after, rev int64
	events     []*clientv3.Event
}

// stream is the queue of what Observe is handed, for Run's goroutine.
type stream struct {
	mu      sync.Mutex
	entries []observed // guarded by mu
	wake    chan struct{}
}

func newStream() *stream { return &stream{wake: make(chan struct{}, 1)} }

// Observe hands the cluster the changes of its keys (the members and the
// shards; others in events are ignored) at etcd revision rev, from the one
// etcd watch of the replica: the etcd store's Follow
// (store/etcd.Options.Membership), which the engine runs. after is the
// revision of the previous call of that Follow, or the one it started
// after: when the view is below it, revisions were missed, and the view
// reloads the keys from etcd. Calls come in revision order; Observe never
// blocks (it queues for Run's goroutine). The view follows etcd only
// through Observe: a Cluster nobody feeds sees no claim, release or
// member but its own.
func (c *Cluster) Observe(after, rev int64, events []*clientv3.Event) {
	st := c.stream
	st.mu.Lock()
	n := len(st.entries)
	switch {
	case n > 0 && len(events) == 0 && st.entries[n-1].rev == after:
		st.entries[n-1].rev = rev // a revision of other keys only
	case n >= maxQueued:
		st.entries = append(st.entries[:0], observed{after, rev, events})
	default:
		st.entries = append(st.entries, observed{after, rev, events})
	}
	st.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// take returns the queued revisions, emptying the queue.
func (st *stream) take() []observed {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := st.entries
	st.entries = nil
	return out
}

// putBack queues os again before what came meanwhile.
func (st *stream) putBack(os []observed) {
	if len(os) == 0 {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.entries = append(os, st.entries...)
}
