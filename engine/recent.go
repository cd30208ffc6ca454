package engine

import (
	"time"

	"github.com/probed/probed/engine/probe"
)

// RecentSamples is how many recent probe runs each probe remembers (for
// sparklines); 4 bytes each.
const RecentSamples = 16

// Sample is one recent probe run.
type Sample struct {
	Result  probe.Result
	Latency time.Duration // microsecond resolution, at most ~17 minutes
}

// recentRing keeps the last RecentSamples runs of a probe compactly: the
// latency in microseconds in the low 30 bits, the result in the top 2.
type recentRing struct {
	buf  [RecentSamples]uint32
	next uint8 // index of the next write
	n    uint8
}

func (r *recentRing) add(out probe.Outcome) {
	us := min(uint64(max(out.Latency, 0)/time.Microsecond), 1<<30-1)
	r.buf[r.next] = uint32(us) | uint32(out.Result)<<30
	r.next = (r.next + 1) % RecentSamples
	r.n = min(r.n+1, RecentSamples)
}

// samples returns the runs, oldest first.
func (r *recentRing) samples() []Sample {
	out := make([]Sample, r.n)
	start := (int(r.next) - int(r.n) + RecentSamples) % RecentSamples
	for i := range out {
		v := r.buf[(start+i)%RecentSamples]
		out[i] = Sample{Result: probe.Result(v >> 30), Latency: time.Duration(v&(1<<30-1)) * time.Microsecond}
	}
	return out
}
