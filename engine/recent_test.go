package engine

import (
	"testing"
	"time"

	"github.com/probed/probed/engine/probe"
)

func TestRecentRing(t *testing.T) {
	t.Parallel()
	var r recentRing
	if len(r.samples()) != 0 {
		t.Fatal("empty ring has samples")
	}
	for i := 1; i <= RecentSamples+3; i++ {
		res := probe.Success
		if i%2 == 0 {
			res = probe.Failure
		}
		r.add(probe.Outcome{Result: res, Latency: time.Duration(i) * time.Millisecond})
	}
	got := r.samples()
	if len(got) != RecentSamples {
		t.Fatalf("%d samples, want %d", len(got), RecentSamples)
	}
	for i, s := range got {
		n := i + 4 // the 3 oldest were overwritten
		want := probe.Success
		if n%2 == 0 {
			want = probe.Failure
		}
		if s.Latency != time.Duration(n)*time.Millisecond || s.Result != want {
			t.Errorf("sample %d = %+v, want %v %v", i, s, time.Duration(n)*time.Millisecond, want)
		}
	}
	r.add(probe.Outcome{Result: probe.Failure, Latency: time.Hour}) // clamped
	if last := r.samples()[RecentSamples-1]; last.Latency != (1<<30-1)*time.Microsecond || last.Result != probe.Failure {
		t.Errorf("clamped sample = %+v", last)
	}
}
