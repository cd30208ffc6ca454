package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/server/auth"
)

// TestApplyWaitsOutTheRateLimit: apply of more targets than the server's
// rate limit allows at once waits as the server's RetryInfo says and
// applies them all.
func TestApplyWaitsOutTheRateLimit(t *testing.T) {
	t.Parallel()
	a := auth.New(auth.Options{Limiter: auth.NewLimiter(50, 2, nil)})
	s := probedtest.Start(t, probedtest.Options{GRPC: a.ServerOptions()})
	var specs, want strings.Builder
	for i := range 8 {
		fmt.Fprintf(&specs, "---\nname: t%d\n", i)
		fmt.Fprintf(&want, "target/t%d created\n", i)
	}
	r := probectl(t.Context(), s.Addr, specs.String(), "apply", "-f", "-")
	if r.code != 0 || r.out != want.String() {
		t.Errorf("apply of 8 targets at 50/s, burst 2: code %d, stdout %q, stderr %q; want all created", r.code, r.out, r.err)
	}
}
