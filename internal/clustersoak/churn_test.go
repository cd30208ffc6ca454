package clustersoak

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestChurnExpect(t *testing.T) {
	c := &churner{ops: map[string][]churnOp{
		"alive":        {{create: true, outcome: acked}},
		"gone":         {{create: true, outcome: acked}, {outcome: acked}},
		"maybe":        {{create: true, outcome: uncertain, err: errors.New("timeout")}},
		"maybe-gone":   {{create: true, outcome: acked}, {outcome: uncertain}},
		"lost-create":  {{create: true, outcome: acked, at: time.Now()}, {outcome: notFound, at: time.Now()}},
		"never-was":    {{create: true, outcome: uncertain}, {outcome: notFound}},
		"created-late": {{create: true, outcome: acked}, {outcome: acked}},
	}}
	want, res := c.expect()
	for name, alive := range map[string]bool{"alive": true, "gone": false, "lost-create": false, "created-late": false} {
		if got, ok := want[name]; !ok || got != alive {
			t.Errorf("%s: expected %v (%v), want %v", name, got, ok, alive)
		}
	}
	for _, name := range []string{"maybe", "maybe-gone", "never-was"} {
		if _, ok := want[name]; ok {
			t.Errorf("%s has an expectation; its fate is uncertain", name)
		}
	}
	if len(res.Lost) != 1 || !strings.HasPrefix(res.Lost[0], "lost-create:") {
		t.Errorf("lost %q, want lost-create's", res.Lost)
	}
	if res.Creates != 5 || res.Deletes != 2 || res.Uncertain != 3 || res.ExpectedAlive != 1 {
		t.Errorf("result %+v", res)
	}
}
