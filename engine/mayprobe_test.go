package engine_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
)

// TestMayProbeGatesDueRuns: while Options.MayProbe is false (cluster
// mode: the lease is over by its local deadline) due runs do not start —
// the backend sees nothing, and they are counted as SkippedLease —, and
// once it is true again they do.
func TestMayProbeGatesDueRuns(t *testing.T) {
	var may atomic.Bool
	may.Store(true)
	h := newHarness(t, func(o *engine.Options) { o.MayProbe = may.Load })
	b := h.newBackend(200)
	h.create(&target.Spec{Name: "web", LivenessProbe: b.probe(1, 0)})
	h.advance(3*time.Second, 500*time.Millisecond)
	if b.hits.Load() == 0 {
		t.Fatal("no probe while MayProbe is true")
	}

	may.Store(false)
	hits := b.hits.Load()
	h.advance(5*time.Second, 500*time.Millisecond)
	if got := b.hits.Load(); got != hits {
		t.Errorf("%d probes while MayProbe is false", got-hits)
	}
	if s := h.eng.Stats(); s.SkippedLease == 0 {
		t.Errorf("Stats().SkippedLease = 0 after 5 due runs refused")
	}

	may.Store(true)
	h.advance(3*time.Second, 500*time.Millisecond)
	if b.hits.Load() == hits {
		t.Error("no probe once MayProbe is true again")
	}
}
