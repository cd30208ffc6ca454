package auth

import (
	"fmt"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	l := NewLimiter(2, 3, func() time.Time { return now })
	for i := range 3 {
		if ok, _ := l.Allow("alice"); !ok {
			t.Fatalf("call %d within the burst refused", i)
		}
	}
	ok, wait := l.Allow("alice")
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("call beyond the burst = %v, retry after %v; want refused, 500ms", ok, wait)
	}
	if ok, _ := l.Allow("bob"); !ok {
		t.Fatal("another identity was limited by alice's calls")
	}
	// A refused call takes nothing: after 500ms exactly one more passes.
	now = now.Add(500 * time.Millisecond)
	if ok, _ := l.Allow("alice"); !ok {
		t.Fatal("refused after the retry delay")
	}
	if ok, _ := l.Allow("alice"); ok {
		t.Fatal("two calls passed after one token's time")
	}
}

func TestLimiterIsBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	l := NewLimiter(1, 1, func() time.Time { return now })
	for i := range maxLimiters + 10 {
		now = now.Add(time.Microsecond)
		l.Allow(fmt.Sprint("id-", i)) // each bucket is left empty
	}
	if n := l.size(); n > maxLimiters {
		t.Fatalf("%d identities remembered, want at most %d", n, maxLimiters)
	}
	// The most recent identity is still limited: the least recent went.
	if ok, _ := l.Allow(fmt.Sprint("id-", maxLimiters+9)); ok {
		t.Error("the most recent identity was forgotten")
	}
	// Full buckets are forgotten first.
	now = now.Add(time.Hour)
	l.Allow("new")
	if n := l.size(); n != 1 {
		t.Errorf("%d identities remembered after every bucket refilled, want 1", n)
	}
}

// TestLimiterReserve: a reservation takes a token now while the bucket
// has one, else the next to come, saying how long until then; cancelled,
// it gives the token back.
func TestLimiterReserve(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	l := NewLimiter(2, 2, func() time.Time { return now })
	for i := range 2 {
		if wait, _ := l.Reserve("alice"); wait != 0 {
			t.Fatalf("reservation %d within the burst waits %v", i, wait)
		}
	}
	wait, cancel := l.Reserve("alice")
	if wait != 500*time.Millisecond {
		t.Fatalf("reservation beyond the burst waits %v, want 500ms", wait)
	}
	if ok, _ := l.Allow("alice"); ok {
		t.Fatal("a call passed while a reservation waits for the next token")
	}
	cancel()
	now = now.Add(500 * time.Millisecond)
	if ok, _ := l.Allow("alice"); !ok {
		t.Fatal("the token of a cancelled reservation was not given back")
	}
}
