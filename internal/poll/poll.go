// Package poll waits, in tests, for a condition that becomes true by
// the work of other goroutines or processes (a real server, etcd, a child
// process): it polls the condition until a deadline and fails the test
// with what it waited for. It waits for an effect; it asserts nothing
// about speed, so a limit is generous (seconds, not milliseconds).
//
// Holds is the other wait a test may need: for "nothing happens", over a
// bound the caller states and justifies.
//
// The package functions poll often at first (after 100 µs, then twice as
// long each time, up to every 10 ms), so a condition met at once costs
// nothing; Every polls at a fixed interval, for a condition that is
// expensive to read (a scrape, an etcd range).
package poll

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Polling intervals of the package functions: from firstInterval,
// doubling, up to maxInterval.
const (
	firstInterval = 100 * time.Microsecond
	maxInterval   = 10 * time.Millisecond
)

// Poller polls at a fixed interval (Every); the zero value polls as the
// package functions do.
type Poller struct {
	interval time.Duration
}

// Every returns a Poller that reads its condition every d: for conditions
// that cost a request or more to read.
func Every(d time.Duration) Poller { return Poller{interval: d} }

// pause returns the sleep after the n-th poll (n from 0).
func (p Poller) pause(n int) time.Duration {
	if p.interval > 0 {
		return p.interval
	}
	return min(firstInterval<<min(n, 16), maxInterval)
}

// Until fails t (Fatalf) unless cond returns true within limit.
func Until(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	Poller{}.Until(t, what, limit, cond)
}

// UntilMet fails t (Fatalf) unless cond returns "" within limit; until then
// cond says what is still missing, and its last word is in the failure.
func UntilMet(t testing.TB, what string, limit time.Duration, cond func() string) {
	t.Helper()
	Poller{}.UntilMet(t, what, limit, cond)
}

// Wait is Until for a goroutine other than the test's (which must not
// call t.Fatalf): it returns nil once cond returns true, or an error
// wrapping ErrNotMet and naming what after limit.
func Wait(what string, limit time.Duration, cond func() bool) error {
	return Poller{}.Wait(what, limit, cond)
}

// Holds fails t (Fatalf) as soon as cond returns something other than ""
// (what happened that should not have) within d, and returns after d: a
// wait for "nothing happens". d is the bound of the claim, which the
// caller states with its reason (the time in which the thing would have
// happened had the code under test been wrong).
func Holds(t testing.TB, what string, d time.Duration, cond func() string) {
	t.Helper()
	Poller{}.Holds(t, what, d, cond)
}

// Until is the package's Until at p's interval.
func (p Poller) Until(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	p.UntilMet(t, what, limit, func() string {
		if cond() {
			return ""
		}
		return "not yet"
	})
}

// UntilMet is the package's UntilMet at p's interval.
func (p Poller) UntilMet(t testing.TB, what string, limit time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for n := 0; ; n++ {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s (%v): %s", what, limit, msg)
		}
		time.Sleep(p.pause(n))
	}
}

// ErrNotMet is what Wait returns when its condition stayed false.
var ErrNotMet = errors.New("condition not met")

// Wait is the package's Wait at p's interval.
func (p Poller) Wait(what string, limit time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for n := 0; !cond(); n++ {
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s (%v): %w", what, limit, ErrNotMet)
		}
		time.Sleep(p.pause(n))
	}
	return nil
}

// Holds is the package's Holds at p's interval.
func (p Poller) Holds(t testing.TB, what string, d time.Duration, cond func() string) {
	t.Helper()
	began := time.Now()
	deadline := began.Add(d)
	for n := 0; ; n++ {
		if msg := cond(); msg != "" {
			t.Fatalf("%s, for %v: after %v: %s", what, d, time.Since(began).Round(time.Millisecond), msg)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		time.Sleep(min(p.pause(n), left))
	}
}
