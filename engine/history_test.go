package engine

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

func revisions(evs []Event, _ []*record) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Revision
	}
	return out
}

func TestHistoryRing(t *testing.T) {
	t.Parallel()
	h := newHistory(3, 0)
	for _, rev := range []uint64{2, 4, 6, 8, 10} { // not contiguous
		ev := Event{Revision: rev}
		h.append(ev, recordOf(&ev), ev.size())
	}
	if got := revisions(h.read(nil, nil, 0, 100)); len(got) != 3 || got[0] != 6 || got[2] != 10 {
		t.Fatalf("retained %v, want [6 8 10]", got)
	}
	if h.compacted != 4 {
		t.Errorf("compacted = %d, want 4", h.compacted)
	}
	if h.oldest(11) != 6 {
		t.Errorf("oldest = %d, want 6", h.oldest(11))
	}
	tests := []struct {
		name  string
		from  uint64
		limit int
		want  []uint64
	}{
		{"from exact revision", 8, 10, []uint64{8, 10}},
		{"from a gap between revisions", 7, 10, []uint64{8, 10}},
		{"limit", 6, 2, []uint64{6, 8}},
		{"past the end", 11, 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := revisions(h.read(nil, nil, tt.from, tt.limit))
			if len(got) != len(tt.want) {
				t.Fatalf("read(%d) = %v, want %v", tt.from, got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("read(%d) = %v, want %v", tt.from, got, tt.want)
				}
			}
		})
	}
}

func TestHistoryByteBound(t *testing.T) {
	t.Parallel()
	one := (&Event{}).size()
	h := newHistory(100, 3*one)
	for rev := uint64(1); rev <= 10; rev++ {
		ev := Event{Revision: rev}
		h.append(ev, recordOf(&ev), ev.size())
	}
	if h.n != 3 || h.bytes > 3*one {
		t.Fatalf("kept %d events (%d bytes), want 3 within %d bytes", h.n, h.bytes, 3*one)
	}
	if h.oldest(11) != 8 || h.compacted != 7 {
		t.Errorf("oldest %d compacted %d, want 8 and 7", h.oldest(11), h.compacted)
	}
}

func TestHistoryEmpty(t *testing.T) {
	t.Parallel()
	h := newHistory(10, 0)
	if evs, _ := h.read(nil, nil, 0, 10); h.oldest(5) != 5 || len(evs) != 0 {
		t.Errorf("empty history: oldest %d, read %v", h.oldest(5), evs)
	}
}

func TestHistoryWrapThenGrow(t *testing.T) {
	t.Parallel()
	one := (&Event{}).size()
	h := newHistory(100, 2*one)
	for rev := uint64(1); rev <= 5; rev++ {
		ev := Event{Revision: rev}
		h.append(ev, recordOf(&ev), ev.size())
	}
	// Lift the byte bound: the ring must keep order while it grows again.
	h.maxBytes = 0
	for rev := uint64(6); rev <= 9; rev++ {
		ev := Event{Revision: rev}
		h.append(ev, recordOf(&ev), ev.size())
	}
	got := revisions(h.read(nil, nil, 0, 100))
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("history out of order after wrap and growth: %v", got)
		}
	}
	if got[len(got)-1] != 9 {
		t.Fatalf("newest = %d, want 9 (%v)", got[len(got)-1], got)
	}
}

// TestRestoredMessagesBounded: the messages of stored events are bounded
// (valid UTF-8, at most probe.MaxMessageBytes) once, when they are
// loaded, so that nothing that reads the history has to bound them again.
func TestRestoredMessagesBounded(t *testing.T) {
	t.Parallel()
	f := newFeed(10, 0)
	long := strings.Repeat("a", probe.MaxMessageBytes+100)
	f.restore(&Stored{Revision: 2, Events: []Event{
		{Revision: 1, Kind: KindTransition, Message: "status: 300 \xf1\xff"},
		{Revision: 2, Kind: KindTransition, Message: long},
	}})
	for _, ev := range readAll(&f.hist) {
		if !utf8.ValidString(ev.Message) || len(ev.Message) > probe.MaxMessageBytes {
			t.Errorf("event %d: restored message %.40q… (%d bytes) is not bounded", ev.Revision, ev.Message, len(ev.Message))
		}
	}
}

// TestRestoredEventsShareLabels: a restored event whose labels are its
// target's holds the target's map, not a copy of its own (the store
// decodes a map per event); one whose labels differ keeps its own.
func TestRestoredEventsShareLabels(t *testing.T) {
	t.Parallel()
	f := newFeed(10, 0)
	labels := map[string]string{"app": "web"}
	f.restore(&Stored{Revision: 3, Targets: []*Target{labelled("a", labels)}, Events: []Event{
		{Revision: 1, Name: "a", Kind: KindTransition, Labels: map[string]string{"app": "web"}},
		{Revision: 2, Name: "a", Kind: KindTransition, Labels: map[string]string{"app": "old"}},
		{Revision: 3, Name: "gone", Kind: KindTransition, Labels: map[string]string{"app": "web"}},
	}})
	evs := readAll(&f.hist)
	same := func(m map[string]string) bool {
		return reflect.ValueOf(m).UnsafePointer() == reflect.ValueOf(labels).UnsafePointer()
	}
	for i, want := range []bool{true, false, false} {
		if got := same(evs[i].Labels); got != want {
			t.Errorf("event %d (%s, %v): shares the target's map = %v; want %v", evs[i].Revision, evs[i].Name, evs[i].Labels, got, want)
		}
	}
	if evs[1].Labels["app"] != "old" || evs[2].Labels["app"] != "web" {
		t.Errorf("labels changed: %v, %v", evs[1].Labels, evs[2].Labels)
	}
}

// TestRestoredEventsShareRecords: a restored lifecycle event of the
// stored target's revision holds the view's record of it; an older one
// (the target changed since) a record of its own.
func TestRestoredEventsShareRecords(t *testing.T) {
	t.Parallel()
	f := newFeed(10, 0)
	at := func(rev uint64) *Target {
		return &Target{Spec: nameOnly("a"), Status: Status{Phase: Active, Revision: rev}}
	}
	f.restore(&Stored{Revision: 4, Targets: []*Target{at(4)}, Events: []Event{
		{Revision: 2, Name: "a", Kind: KindCreated, Target: at(2)},
		{Revision: 4, Name: "a", Kind: KindReset, Target: at(4)},
	}})
	view, _ := f.view.Get(named("a"))
	if f.hist.records[0] == view || f.hist.records[1] != view {
		t.Errorf("records of the events at 2 and 4: %p, %p; want a record of its own, then the view's %p", f.hist.records[0], f.hist.records[1], view)
	}
	if evs := readAll(&f.hist); evs[0].Target.Status.Revision != 2 || evs[1].Target.Status.Revision != 4 {
		t.Errorf("targets of the events: revisions %d, %d; want 2, 4", evs[0].Target.Status.Revision, evs[1].Target.Status.Revision)
	}
}

// TestRestoredEventsShareSpecsAndNames: a restored lifecycle event of an
// older revision whose spec is the stored target's (a CREATED event, the
// target probed since) holds the view's spec, not the copy the store
// decoded for it; an event of a spec that changed since keeps its own.
// Every event of the target holds the view's name string, and the
// engine's reasons are the engine's strings (the store decodes one of
// each per event).
func TestRestoredEventsShareSpecsAndNames(t *testing.T) {
	t.Parallel()
	f := newFeed(10, 0)
	spec := func(port int32) *target.Spec {
		return &target.Spec{Name: strings.Clone("a"), Labels: map[string]string{"app": "web"},
			ReadinessProbe: &probe.Spec{Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: "127.0.0.1", Port: port}}, PeriodSeconds: 5}}
	}
	at := func(rev uint64, s *target.Spec) *Target {
		return &Target{Spec: s, Status: Status{Phase: Active, Revision: rev}}
	}
	stored := at(4, spec(80))
	f.restore(&Stored{Revision: 4, Targets: []*Target{stored}, Events: []Event{
		{Revision: 1, Name: strings.Clone("a"), Kind: KindCreated, Target: at(1, spec(81))},
		{Revision: 2, Name: strings.Clone("a"), Kind: KindUpdated, Reason: strings.Clone(ReasonUpdated), Target: at(2, spec(80))},
		{Revision: 3, Name: strings.Clone("a"), Kind: KindTransition, Reason: strings.Clone(ReasonProbe)},
		{Revision: 4, Name: strings.Clone("a"), Kind: KindTransition, Reason: "Custom"},
	}})
	evs := readAll(&f.hist)
	if len(evs) != 4 {
		t.Fatalf("%d events restored, want 4", len(evs))
	}
	if evs[0].Target.Spec == stored.Spec || evs[0].Target.Spec.ReadinessProbe.Handler.TCPSocket.Port != 81 {
		t.Errorf("event 1 (an older spec): holds the stored target's spec, or lost its own: %+v", evs[0].Target.Spec.ReadinessProbe.Handler.TCPSocket)
	}
	if evs[1].Target.Spec != stored.Spec {
		t.Errorf("event 2 (the stored spec, an older revision): holds a spec of its own, want the view's")
	}
	for _, ev := range evs {
		if unsafe.StringData(ev.Name) != unsafe.StringData(stored.Spec.Name) {
			t.Errorf("event %d: holds a name string of its own, want the view's", ev.Revision)
		}
	}
	for i, want := range []string{"", ReasonUpdated, ReasonProbe} {
		if evs[i].Reason != want || (want != "" && unsafe.StringData(evs[i].Reason) != unsafe.StringData(want)) {
			t.Errorf("event %d: reason %q is not the engine's string %q", evs[i].Revision, evs[i].Reason, want)
		}
	}
	if evs[3].Reason != "Custom" {
		t.Errorf("event 4: reason %q, want Custom", evs[3].Reason)
	}
}

// readAll returns the first 10 events of h with their targets.
func readAll(h *history) []Event {
	evs, recs := h.read(nil, nil, 0, 10)
	for i, r := range recs {
		if r != nil {
			evs[i].Target = r.target(nil)
		}
	}
	return evs
}

// recordOf returns the record of ev's Target, nil without one.
func recordOf(ev *Event) *record {
	if ev.Target == nil {
		return nil
	}
	return newRecord(ev.Target)
}

// TestHistoryReadWholeCutsBetweenDeliveries: a batch cut by its limit
// ends where a delivery ends (the events a publish appended together),
// unless one delivery is larger than the limit; more says whether newer
// events remain.
func TestHistoryReadWholeCutsBetweenDeliveries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		deliveries []int // sizes, in order
		capacity   int   // the history's count bound
		from       uint64
		limit      int
		want       int // events read
		more       bool
	}{
		{"all fit", []int{3, 4}, 100, 1, 10, 7, false},
		{"cut at the delivery that does not fit", []int{3, 4}, 100, 1, 5, 3, true},
		{"cut exactly at its end", []int{3, 4}, 100, 1, 3, 3, true},
		{"a delivery larger than the limit is cut", []int{8, 2}, 100, 1, 5, 5, true},
		{"from the middle of a delivery", []int{3, 4}, 100, 2, 4, 2, true},
		{"wrapped ring", []int{4, 4, 4, 4}, 10, 7, 5, 2, true},
		{"wrapped ring, to the end", []int{4, 4, 4, 4}, 10, 9, 20, 8, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHistory(tt.capacity, 0)
			rev := uint64(0)
			for _, n := range tt.deliveries {
				for i := range n {
					rev++
					ev := Event{Revision: rev}
					h.append(ev, nil, ev.size())
					if i < n-1 {
						h.joinNext()
					}
				}
			}
			got, recs, more := h.readWhole(nil, nil, tt.from, tt.limit)
			if len(got) != tt.want || len(recs) != tt.want || more != tt.more {
				t.Fatalf("readWhole(%d, limit %d) = %v (more %v), want %d events (more %v)", tt.from, tt.limit, revisions(got, recs), more, tt.want, tt.more)
			}
			if len(got) > 0 && got[0].Revision != max(tt.from, h.oldest(0)) {
				t.Errorf("first revision %d, want %d", got[0].Revision, max(tt.from, h.oldest(0)))
			}
		})
	}
}
