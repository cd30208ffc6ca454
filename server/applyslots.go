package server

import (
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// applySlots counts the ApplyTargets calls each identity has open, to
// bound the sets one identity makes probed hold at once.
type applySlots struct {
	mu   sync.Mutex
	open map[string]int // calls open per identity; guarded by mu
}

// take takes one of identity's max slots, or is ResourceExhausted when
// all are taken; release gives it back.
func (a *applySlots) take(identity string, max int) (release func(), err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.open[identity] >= max {
		return nil, status.Error(codes.ResourceExhausted, fmt.Sprintf(
			"%q has %d ApplyTargets calls open already, the most one identity may (--max-applies-per-client); retry once one has ended", identity, max))
	}
	a.open[identity]++
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.open[identity]--; a.open[identity] == 0 {
				delete(a.open, identity)
			}
		})
	}, nil
}
