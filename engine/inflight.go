package engine

import "context"

// creation is a create (or an Apply's creates) over a SharedStore in
// flight on this replica: from the limit check until the caller has its
// answer. The limits count it until its target is in the registry, so
// that concurrent creates cannot all pass a check that sees only the
// registry (issue 22).
type creation struct {
	client string
	done   chan struct{} // closed when the create has ended
}

// startCreates waits until no create of any of names is in flight here,
// runs admit (the limit checks; e.mu held) and records the names in
// flight until done is called.
func (e *Engine) startCreates(ctx context.Context, names []string, client string, admit func() error) (done func(), err error) {
	for {
		e.mu.Lock()
		wait := e.busyLocked(names)
		if wait == nil {
			if err := admit(); err != nil {
				e.mu.Unlock()
				return nil, err
			}
			c := &creation{client: client, done: make(chan struct{})}
			for _, name := range names {
				e.creating[name] = c
			}
			e.mu.Unlock()
			return func() {
				e.mu.Lock()
				for _, name := range names {
					delete(e.creating, name)
				}
				e.mu.Unlock()
				close(c.done)
			}, nil
		}
		e.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// busyLocked returns the done channel of a create in flight of one of
// names, or nil; e.mu held.
func (e *Engine) busyLocked(names []string) <-chan struct{} {
	for _, name := range names {
		if c, ok := e.creating[name]; ok {
			return c.done
		}
	}
	return nil
}

// inFlightLocked counts the creates in flight here whose target is not
// in the registry yet (a create's target joins it when the view follows
// the write, a moment before the create ends): in total, and client's;
// e.mu held.
func (e *Engine) inFlightLocked(client string) (total, mine int) {
	for name, c := range e.creating {
		if _, ok := e.targets[name]; ok {
			continue
		}
		total++
		if client != "" && c.client == client {
			mine++
		}
	}
	return total, mine
}
