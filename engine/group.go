package engine

// A group makes the changes of several operations one unit of the
// committer: they are written in one Commit (all or none) and published
// as one contiguous run of revisions, with no other change between them.
// While a group is open, changes submitted outside it (probe transitions,
// other calls) wait behind it, in their order; so a change about a target
// that an operation of the group touched (a transition after its update)
// is still published after the group's change. Open groups one at a time
// (Engine.applyMu) and close each (commit) promptly: everything else
// waits for it.
type group struct {
	c       *committer
	pending []pendingChange
}

// open starts a group.
func (c *committer) open() *group {
	c.mu.Lock()
	c.holding = true
	c.mu.Unlock()
	return &group{c: c}
}

// submit adds changes to the group; the channel (if wait) receives the
// outcome of the whole group once it is committed.
func (g *group) submit(changes []*Change, wait bool) (<-chan error, error) {
	g.c.mu.Lock()
	closed := g.c.closed
	g.c.mu.Unlock()
	if closed != nil {
		return nil, closed
	}
	var done chan error
	if wait {
		done = make(chan error, 1)
	}
	for i, ch := range changes {
		p := g.c.pendingOf(ch)
		if i == len(changes)-1 {
			p.done = done
		}
		g.pending = append(g.pending, p)
	}
	return done, nil
}

// commit closes the group: its changes are queued as one unit, followed
// by what was held meanwhile. It returns the channel that receives the
// group's outcome (nil for an empty group).
func (g *group) commit() <-chan error {
	var done chan error
	if len(g.pending) > 0 {
		done = make(chan error, 1)
		g.pending = append(g.pending, pendingChange{done: done, last: true})
	}
	c := g.c
	c.mu.Lock()
	c.holding = false
	held := c.held
	c.held = nil
	if c.closed != nil {
		c.mu.Unlock()
		notify(g.pending, c.closed)
		notify(held, c.closed)
		return done
	}
	c.pending = append(c.pending, g.pending...)
	c.pending = append(c.pending, held...)
	c.mu.Unlock()
	c.signal()
	return done
}

// drop closes the group without writing its changes (their waiters get
// ErrClosed); what was held meanwhile is queued.
func (g *group) drop() {
	c := g.c
	c.mu.Lock()
	c.holding = false
	c.pending = append(c.pending, c.held...)
	c.held = nil
	c.mu.Unlock()
	notify(g.pending, ErrClosed)
	g.pending = nil
	c.signal()
}

// revision returns the revision of the group's last change once
// committed (0 if it has none).
func (g *group) revision() uint64 {
	for i := len(g.pending) - 1; i >= 0; i-- {
		if ch := g.pending[i].change; ch != nil {
			return ch.Event.Revision
		}
	}
	return 0
}
