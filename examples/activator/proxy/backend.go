package proxy

import (
	"net/http/httputil"
	"sync"
	"sync/atomic"
	"time"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// backend is one Backend and what the proxy knows of its target.
type backend struct {
	Backend
	spec     *probev1.Target // the target registered for it
	rp       *httputil.ReverseProxy
	lastUsed atomic.Int64 // unix ns of the last request

	mu sync.Mutex
	// ready: probed's last word is that the target is ready. Guarded by
	// mu, as are the fields below.
	ready bool
	// registered: the target exists and is not being deleted, as far as
	// the proxy knows.
	registered bool
	// rev is the revision of the event ready and registered come from;
	// older news is ignored.
	rev uint64
	// flight is the wait in progress, nil when none.
	flight *flight
}

// flight is one wait for a backend, shared by every request held
// meanwhile: done is closed when it ends, after err is set.
type flight struct {
	done chan struct{}
	err  error
}

func (b *backend) isReady() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ready
}

func (b *backend) isRegistered() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.registered
}

// observe records the target's state as of revision rev, unless the
// proxy knows a later one.
func (b *backend) observe(rev uint64, ready, registered bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rev < b.rev {
		return
	}
	b.rev, b.ready, b.registered = rev, ready, registered
}

// unregister marks the target as gone (not ready either) and reports
// whether it was known to exist.
func (b *backend) unregister() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	was := b.registered
	b.registered, b.ready = false, false
	return was
}

// idle reports whether b has a target, no wait in progress and no request
// for timeout.
func (b *backend) idle(now time.Time, timeout time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.registered && b.flight == nil && now.Sub(time.Unix(0, b.lastUsed.Load())) >= timeout
}
