package clustersoak

import (
	"strings"
	"testing"
	"time"
)

// TestReportNamesEveryInvariant: the report says of each invariant
// whether it held, and lists the violations of those that did not.
func TestReportNamesEveryInvariant(t *testing.T) {
	r := &Report{Seed: 7, Config: Config{Replicas: 5, Targets: 10, Period: time.Second, LeaseTTL: 2 * time.Second, Slack: time.Second}}
	r.violate(InvWrites, "c-1 lost")
	var b strings.Builder
	r.Write(&b)
	out := b.String()
	for _, n := range invariants {
		if !strings.Contains(out, n+" held") && !strings.Contains(out, n+" VIOLATED") {
			t.Errorf("the report says nothing of %s:\n%s", n, out)
		}
	}
	if !strings.Contains(out, "writes VIOLATED ×1") || !strings.Contains(out, "c-1 lost") || !strings.Contains(out, "PROBED_SOAK_SEED=7") {
		t.Errorf("the report does not show the violation or the seed:\n%s", out)
	}
}
