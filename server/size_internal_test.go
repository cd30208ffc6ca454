package server

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestFitsOneResponseBoundsTheSize: the bound fitsOneResponse takes
// without encoding is never below an event's encoded size, for the
// largest probe events validation allows, so a batch it lets through
// whole fits in one Watch message; a batch with a target is sized
// exactly, and one over the limit is split.
func TestFitsOneResponseBoundsTheSize(t *testing.T) {
	t.Parallel()
	largest := &probev1.Event{
		Revision: ^uint64(0), Time: timestamppb.Now(), Name: strings.Repeat("n", target.MaxNameBytes),
		Kind: probev1.EventKind_EVENT_KIND_TRANSITION, ProbeType: probev1.ProbeType_PROBE_TYPE_READINESS,
		From: probev1.Result_RESULT_FAILURE, To: probev1.Result_RESULT_SUCCESS, Consecutive: -1,
		Latency: durationpb.New(-1 << 62), Message: strings.Repeat("\uFFFD", probe.MaxMessageBytes/3),
		Reason: longestReason, Started: true, Ready: true, Live: true,
	}
	tests := []struct {
		name   string
		events []*probev1.Event
		want   bool
	}{
		{name: "one small event", events: []*probev1.Event{{Revision: 1, Name: "a", Message: "ok"}}, want: true},
		{name: "a hundred of the largest probe events", events: repeat(largest, 100), want: true},
		{name: "more of them than fit", events: repeat(largest, MaxResponseBytes/proto.Size(largest)+1), want: false},
		{name: "an event with a target", events: []*probev1.Event{{Revision: 1, Target: &probev1.Target{Name: "a"}}}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := fitsOneResponse(tt.events); got != tt.want {
				t.Errorf("fitsOneResponse() = %v; want %v", got, tt.want)
			}
			if tt.want {
				if n := proto.Size(&probev1.WatchResponse{Events: tt.events, Revision: ^uint64(0)}); n > MaxResponseBytes {
					t.Errorf("let through %d bytes in one message; want at most %d", n, MaxResponseBytes)
				}
			}
		})
	}
}

// longestReason is a reason as long as the engine's longest.
const longestReason = "Terminating"

func repeat(ev *probev1.Event, n int) []*probev1.Event {
	out := make([]*probev1.Event, n)
	for i := range out {
		out[i] = ev
	}
	return out
}
