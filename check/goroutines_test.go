package check_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
)

// TestIdleCheckersHoldNoGoroutines: goroutines grow with probes in
// flight, not with targets. After one check each, a hundred checkers of
// every kind — HTTP with its connection kept alive (net/http ran two
// goroutines per kept connection), HTTP and HTTPS, TCP, gRPC with a
// channel per check, exec — hold no goroutine, and closing them leaves
// none. A hundred gRPC checkers of one address share one channel: they
// hold its goroutines (grpc-go's, at most sharedChannelGoroutines), not
// a hundred times as many. The targets run in another process, so that only the checkers'
// goroutines are counted. Not parallel: it counts the process's
// goroutines.
// sharedChannelGoroutines bounds the goroutines of one connected gRPC
// channel: grpc-go's transport reader and writer, and its channel's
// serializers.
const sharedChannelGoroutines = 6

func TestIdleCheckersHoldNoGoroutines(t *testing.T) {
	r := startRemote(t)
	const checkers = 100
	for _, tt := range r.kinds(t) {
		t.Run(tt.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			set := check.New(tt.opts)
			cs := make([]engine.Checker, checkers)
			for i := range cs {
				c, err := set.Open("target", probe.Readiness, tt.handler())
				if err != nil {
					t.Fatal(err)
				}
				cs[i] = c
			}
			closed := false
			closeAll := func() {
				if !closed {
					for _, c := range cs {
						c.Close()
					}
					closed = true
				}
			}
			t.Cleanup(closeAll)
			for i, c := range cs {
				if out := run(t, c, timeout); out.Result != probe.Success {
					t.Fatalf("checker %d: %v %q", i, out.Result, out.Message)
				}
			}
			// A dial's or a channel's last goroutines end just after the
			// check returns.
			held := 0
			if tt.shared {
				held = sharedChannelGoroutines
			}
			eventually(t, fmt.Sprintf("%d idle %s checkers: %d goroutines more than before", checkers, tt.name, runtime.NumGoroutine()-base),
				func() bool { return runtime.NumGoroutine() <= base+held })
			closeAll()
			eventually(t, fmt.Sprintf("closed: %d goroutines more than before", runtime.NumGoroutine()-base),
				func() bool { return runtime.NumGoroutine() <= base })
		})
	}
}
