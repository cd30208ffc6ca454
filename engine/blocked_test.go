package engine_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/internal/poll"
)

// waitBlocked waits until n goroutines are blocked on a channel (state
// select or chan receive) inside the function fn, as their stacks show:
// a barrier for a call that has reached its wait (a Trigger that joined
// a run, a Create whose change is queued) when nothing else observes it.
func waitBlocked(t *testing.T, fn string, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	poll.UntilMet(t, "goroutines blocked in "+fn, 10*time.Second, func() string {
		blocked := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			head, _, _ := strings.Cut(g, "\n")
			if (strings.Contains(head, "[select") || strings.Contains(head, "[chan receive")) && strings.Contains(g, fn+"(") {
				blocked++
			}
		}
		if blocked >= n {
			return ""
		}
		return fmt.Sprintf("%d goroutines blocked in %s after 10s, want %d", blocked, fn, n)
	})
}
