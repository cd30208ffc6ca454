package poll_test

import (
	"testing"

	"github.com/probed/probed/internal/poll"
)

// parkedHere blocks on ch until it is closed.
//
//go:noinline
func parkedHere(ch chan struct{}) { <-ch }

// TestUntilBlocked: it returns once the goroutines are blocked in the
// named function.
func TestUntilBlocked(t *testing.T) {
	t.Parallel()
	ch := make(chan struct{})
	defer close(ch)
	for range 3 {
		go parkedHere(ch)
	}
	poll.UntilBlocked(t, "poll_test.parkedHere", 3)
}
