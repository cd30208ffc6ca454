package auth

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxLimiters bounds the identities a Limiter remembers.
const maxLimiters = 10_000

// Limiter is a token bucket per client identity: each identity may spend
// perSecond tokens a second on average, burst at once. It remembers at
// most maxLimiters identities; beyond that it forgets the ones whose
// bucket is full (forgetting them changes nothing), then the least
// recently seen. It is safe for concurrent use.
type Limiter struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket // guarded by mu
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time // last use
}

// NewLimiter returns a limiter of perSecond tokens a second per identity,
// with bursts of burst (at least 1). now is the clock (nil: time.Now).
func NewLimiter(perSecond float64, burst int, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{limit: rate.Limit(perSecond), burst: max(burst, 1), now: now, buckets: make(map[string]*bucket)}
}

// Allow takes a token of identity's bucket. When the bucket is empty it
// takes nothing and returns false with how long until a token is
// available.
func (l *Limiter) Allow(identity string) (ok bool, retryAfter time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(identity, now)
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Reserve takes a token of identity's bucket now, or the next one to come
// when the bucket is empty: it returns how long until that token is the
// caller's (0: now), and cancel, which gives it back (call it when the
// caller gives up waiting). A caller charged by size (server: the targets
// of an ApplyTargets set beyond the first server.ApplyTargetsPerToken)
// waits for its tokens, or gives up when the wait is too long.
func (l *Limiter) Reserve(identity string) (wait time.Duration, cancel func()) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(identity, now)
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return time.Duration(math.MaxInt64), func() {}
	}
	return r.DelayFrom(now), func() { r.CancelAt(l.now()) }
}

// bucketLocked returns identity's bucket, made (and some other forgotten,
// past maxLimiters) if it had none; l.mu held.
func (l *Limiter) bucketLocked(identity string, now time.Time) *bucket {
	b := l.buckets[identity]
	if b == nil {
		if len(l.buckets) >= maxLimiters {
			l.evictLocked(now)
		}
		b = &bucket{lim: rate.NewLimiter(l.limit, l.burst)}
		l.buckets[identity] = b
	}
	b.last = now
	return b
}

// evictLocked makes room for one more bucket; l.mu held.
func (l *Limiter) evictLocked(now time.Time) {
	var (
		oldest   string
		oldestAt time.Time
		found    bool
	)
	for id, b := range l.buckets {
		if b.lim.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, id)
			continue
		}
		if !found || b.last.Before(oldestAt) {
			oldest, oldestAt, found = id, b.last, true
		}
	}
	if len(l.buckets) >= maxLimiters && found {
		delete(l.buckets, oldest)
	}
}

// size returns how many identities the limiter remembers (for tests).
func (l *Limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
