package ui

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/probed/probed/engine"
)

func TestFollowReadiness(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 10, 12, 0, 0, 0, time.UTC)
	from := t0.Add(time.Minute) // the window starts a minute after t0
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ms := func(s int) int64 { return at(s).UnixMilli() }
	ev := func(s int, name string, kind engine.EventKind, ready bool) engine.Event {
		return engine.Event{Time: at(s), Name: name, Kind: kind, Ready: ready}
	}
	one := func(v int) *int { return &v }
	tests := []struct {
		name   string
		events []engine.Event
		want   map[string]*timelineView
	}{
		{
			name:   "changed before the window only: no timeline (its state held)",
			events: []engine.Event{ev(0, "a", engine.KindCreated, false), ev(10, "a", engine.KindTransition, true)},
			want:   map[string]*timelineView{},
		},
		{
			name: "state at the start of the window, then changes",
			events: []engine.Event{
				ev(0, "a", engine.KindCreated, false), ev(10, "a", engine.KindTransition, true),
				ev(70, "a", engine.KindTransition, false), ev(80, "a", engine.KindTransition, true),
			},
			want: map[string]*timelineView{"a": {Start: one(stateReady), Changes: [][2]int64{{ms(70), stateNotReady}, {ms(80), stateReady}}}},
		},
		{
			name: "events that leave readiness as it was are no change",
			events: []engine.Event{
				ev(0, "a", engine.KindCreated, true), ev(70, "a", engine.KindTransition, true), ev(75, "a", engine.KindUpdated, true),
			},
			want: map[string]*timelineView{},
		},
		{
			name:   "created in the window: no state before",
			events: []engine.Event{ev(65, "a", engine.KindCreated, false), ev(66, "a", engine.KindTransition, true)},
			want:   map[string]*timelineView{"a": {Created: ms(65), Changes: [][2]int64{{ms(65), stateNotReady}, {ms(66), stateReady}}}},
		},
		{
			name: "terminating is its own state until deleted",
			events: []engine.Event{
				ev(0, "a", engine.KindCreated, true), ev(70, "a", engine.KindTerminating, false), ev(71, "a", engine.KindTransition, false),
				ev(0, "b", engine.KindCreated, true), ev(72, "b", engine.KindTerminating, false), ev(73, "b", engine.KindDeleted, false),
			},
			want: map[string]*timelineView{"a": {Start: one(stateReady), Changes: [][2]int64{{ms(70), stateTerminating}}}},
		},
		{
			name: "deleted and created again: the new target's timeline",
			events: []engine.Event{
				ev(61, "a", engine.KindCreated, true), ev(62, "a", engine.KindDeleted, false), ev(63, "a", engine.KindCreated, false),
			},
			want: map[string]*timelineView{"a": {Created: ms(63), Changes: [][2]int64{{ms(63), stateNotReady}}}},
		},
		{
			name:   "history starting in the window: the state before is unknown",
			events: []engine.Event{ev(70, "a", engine.KindTransition, true), ev(71, "a", engine.KindTransition, false)},
			want:   map[string]*timelineView{"a": {Changes: [][2]int64{{ms(70), stateReady}, {ms(71), stateNotReady}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			targets := map[string]*timelineState{}
			for i := range tt.events {
				followReadiness(targets, &tt.events[i], from)
			}
			got := map[string]*timelineView{}
			for name, tl := range targets {
				if tl.view != nil {
					got[name] = tl.view
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("timelines (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTimelineKeepsTheLatestChanges: a target flapping all the time keeps
// its last maxChanges changes, and its state before them is unknown.
func TestTimelineKeepsTheLatestChanges(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 10, 12, 0, 0, 0, time.UTC)
	targets := map[string]*timelineState{}
	followReadiness(targets, &engine.Event{Time: t0, Name: "a", Kind: engine.KindCreated}, t0)
	for i := 1; i <= 2*maxChanges; i++ {
		followReadiness(targets, &engine.Event{Time: t0.Add(time.Duration(i) * time.Millisecond), Name: "a", Kind: engine.KindTransition, Ready: i%2 == 1}, t0)
	}
	v := targets["a"].view
	if len(v.Changes) != maxChanges || v.Start != nil || v.Created != 0 {
		t.Fatalf("%d changes, start %v, created %d; want %d, unknown, unknown", len(v.Changes), v.Start, v.Created, maxChanges)
	}
	if last := v.Changes[maxChanges-1]; last != [2]int64{t0.Add(2 * maxChanges * time.Millisecond).UnixMilli(), stateNotReady} {
		t.Errorf("last change %v, want the last event's", last)
	}
}

func TestLastN(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 3, 5, 7} {
		l := newLastN[int](5)
		for i := range n {
			l.add(i)
		}
		var want []int
		for i := max(0, n-5); i < n; i++ {
			want = append(want, i)
		}
		if diff := cmp.Diff(want, l.values(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("after %d adds (-want +got):\n%s", n, diff)
		}
	}
}
