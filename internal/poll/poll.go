// Package poll waits, in tests, for a condition that becomes true by
// the work of other goroutines or processes (a real server, etcd, a child
// process): it polls the condition until a deadline and fails the test
// with what it waited for. It waits for an effect; it asserts nothing
// about speed, so a limit is generous (seconds, not milliseconds).
package poll

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// interval is the time between two polls.
const interval = 10 * time.Millisecond

// Until fails t (Fatalf) unless cond returns true within limit.
func Until(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	UntilMet(t, what, limit, func() string {
		if cond() {
			return ""
		}
		return "not yet"
	})
}

// UntilMet fails t (Fatalf) unless cond returns "" within limit; until then
// cond says what is still missing, and its last word is in the failure.
func UntilMet(t testing.TB, what string, limit time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s (%v): %s", what, limit, msg)
		}
		time.Sleep(interval)
	}
}

// ErrNotMet is what Wait returns when its condition stayed false.
var ErrNotMet = errors.New("condition not met")

// Wait is Until for a goroutine other than the test's (which must not
// call t.Fatalf): it returns nil once cond returns true, or an error
// wrapping ErrNotMet and naming what after limit.
func Wait(what string, limit time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s (%v): %w", what, limit, ErrNotMet)
		}
		time.Sleep(interval)
	}
	return nil
}
