package poll

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// UntilBlocked fails t unless, within 10 s, at least n goroutines are
// blocked on a channel (state select or chan receive) inside the function
// fn (as "pkg.Func" appears in a stack), as their stacks show: a barrier
// for a call that has reached its wait (a Create whose change is queued,
// a Trigger that joined a run) when nothing else observes it.
func UntilBlocked(t testing.TB, fn string, n int) {
	t.Helper()
	buf := make([]byte, 16<<20)
	UntilMet(t, "goroutines blocked in "+fn, 10*time.Second, func() string {
		if blocked := countBlocked(string(buf[:runtime.Stack(buf, true)]), fn); blocked < n {
			return fmt.Sprintf("%d goroutines blocked in %s, want %d", blocked, fn, n)
		}
		return ""
	})
}

// countBlocked counts the goroutines of stacks (runtime.Stack's text of
// every goroutine) blocked on a channel with fn on their stack.
func countBlocked(stacks, fn string) int {
	blocked := 0
	for _, g := range strings.Split(stacks, "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		if (strings.Contains(head, "[select") || strings.Contains(head, "[chan receive")) && strings.Contains(g, fn+"(") {
			blocked++
		}
	}
	return blocked
}
