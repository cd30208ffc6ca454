package engine

import (
	"sync"

	"github.com/probed/probed/engine/probe"
)

// maxTimings bounds the distinct timings a timingSet shares: beyond it a
// runner holds a timing of its own, so that specs with ever new timings
// cannot grow the set without bound.
const maxTimings = 4096

// timingSet holds one copy of each effective timing its runners use:
// a runner points to it (8 bytes) instead of holding 48, and targets
// registered together nearly always share a few timings. Entries are
// never removed (bounded by maxTimings).
type timingSet struct {
	mu sync.Mutex
	m  map[probe.Effective]*probe.Effective
}

// of returns the set's copy of e, adding it if there is room, else a new
// copy; never modify what it returns.
func (s *timingSet) of(e probe.Effective) *probe.Effective {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.m[e]; ok {
		return p
	}
	p := &e
	if len(s.m) < maxTimings {
		if s.m == nil {
			s.m = make(map[probe.Effective]*probe.Effective)
		}
		s.m[e] = p
	}
	return p
}

// timing is the effective timing of p (with the server's floors) as a
// runner holds it.
func (e *Engine) timing(p *probe.Spec) *probe.Effective {
	return e.timings.of(e.effective(p))
}
