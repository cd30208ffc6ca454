package cluster

import (
	"slices"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
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
//
// Ownership follows the stream exactly: a claim of this replica at rev
// turns Owns true and calls Gain, a key taken from its lease turns Owns
// false and calls Drop, here, before Observe returns — so that, called
// once the engine's view has reached rev and before it goes further (the
// store's Follow does), the engine takes and drops targets at the
// revision of the claim or the loss.
func (c *Cluster) Observe(after, rev int64, events []*clientv3.Event) {
	c.own(rev, events)
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

// own applies the changes of the shard keys at rev to the streamed view
// and tells Gain and Drop which shards this replica's engine now probes
// or stops probing.
func (c *Cluster) own(rev int64, events []*clientv3.Event) {
	var touched []int
	for _, ev := range events {
		// Members matter to the assignment only (the view's).
		if s, ok := c.keys.parseShard(string(ev.Kv.Key)); ok {
			touched = append(touched, s)
		}
	}
	c.reown(touched, rev, func() {
		for _, ev := range events {
			if _, ok := c.keys.parseShard(string(ev.Kv.Key)); ok {
				c.streamed.apply(ev, 0)
			}
		}
	})
}

// ownReloaded brings the streamed view up to a reload of the member and
// shard keys at rev (kvs), after a gap in the stream: the shards whose
// last change the stream showed is older take the reload's owner, and
// Gain and Drop are told what that changed for this replica.
func (c *Cluster) ownReloaded(kvs []*mvccpb.KeyValue, rev int64) {
	fresh := newView(c.keys)
	fresh.load(kvs, rev, 0)
	all := make([]int, len(fresh.owners))
	for s := range all {
		all[s] = s
	}
	c.reown(all, rev, func() {
		for s, o := range fresh.owners {
			if c.streamed.owners[s].rev < rev { // else the stream is past the reload there
				c.streamed.setOwner(s, o)
			}
		}
	})
}

// reown runs change, which brings the streamed view to revision rev and
// may change the owners of shards (no other), and tells Drop and then Gain
// (with the newest claim among the gained) what that changed for this
// replica's engine.
func (c *Cluster) reown(shards []int, rev int64, change func()) {
	c.owning.Lock()
	defer c.owning.Unlock()
	c.mu.Lock()
	was := make([]bool, len(shards))
	for i, s := range shards {
		was[i] = c.ownsLocked(s)
	}
	change()
	c.streamed.rev = max(c.streamed.rev, rev)
	var gained, dropped []int
	var claimed int64
	for i, s := range shards {
		switch now := c.ownsLocked(s); {
		case now && !was[i]:
			gained = append(gained, s)
			claimed = max(claimed, c.streamed.owners[s].rev)
		case was[i] && !now:
			dropped = append(dropped, s)
		}
	}
	c.mu.Unlock()
	if len(dropped) > 0 {
		slices.Sort(dropped)
		c.log.Warn("shards lost: their owner keys left this replica's lease", "shards", len(dropped), "revision", rev)
		c.opts.Drop(dropped)
	}
	if len(gained) > 0 {
		slices.Sort(gained)
		c.opts.Gain(gained, claimed)
		c.log.Info("gained shards", "shards", len(gained), "revision", claimed, "owned", c.Stats().Shards)
	}
}
