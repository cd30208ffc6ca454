package ui_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/ui"
)

func revID(rev uint64) string { return strconv.FormatUint(rev, 10) }

// readSnapshot reads the start of a new stream (retry, reset, snapshot)
// and returns the snapshot's targets and its message.
func readSnapshot(t *testing.T, s *stream, wantReason string) ([]targetJSON, sseMsg) {
	t.Helper()
	if m := s.next(); m.retry != "1000" {
		t.Fatalf("first message %+v, want retry: 1000", m)
	}
	var reset struct{ Reason string }
	if m := s.nextEvent("reset", &reset); m.hasID || reset.Reason != wantReason {
		t.Fatalf("reset %+v (%+v), want no id and reason %q", m, reset, wantReason)
	}
	var targets []targetJSON
	for {
		var snap snapshotJSON
		m := s.nextEvent("snapshot", &snap)
		targets = append(targets, snap.Targets...)
		if !snap.Complete {
			if m.hasID {
				t.Fatalf("incomplete snapshot part has id %q: the page would resume with half a snapshot", m.id)
			}
			continue
		}
		if m.id != revID(snap.Revision) {
			t.Fatalf("complete snapshot id %q, want its revision %d", m.id, snap.Revision)
		}
		return targets, m
	}
}

func targetNames(ts []targetJSON) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func TestEventsSnapshotThenLive(t *testing.T) {
	t.Parallel()
	p := newPage(t, pageOptions{})
	p.create(t, &target.Spec{Name: "a"})
	b := p.create(t, tcpTarget("b", 1))
	s := p.openStream(t, nil, "")

	targets, m := readSnapshot(t, s, "new stream")
	if got, want := targetNames(targets), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("snapshot targets %v, want %v", got, want)
	}
	if m.id != revID(b.Status.Revision) {
		t.Fatalf("snapshot id %q, want the revision of the last change %d", m.id, b.Status.Revision)
	}
	if got := targets[1]; got.Ready || got.Phase != "active" || got.Probes["readiness"].Result != "failure" || got.Probes["readiness"].PeriodMs != 10000 {
		t.Fatalf("target b in the snapshot: %+v, want active, not ready, readiness failure every 10000ms", got)
	}

	c := p.create(t, &target.Spec{Name: "c", Labels: map[string]string{"tier": "web"}})
	var evs eventsJSON
	m = s.nextEvent("events", &evs)
	if m.id != revID(c.Status.Revision) || evs.Revision != c.Status.Revision {
		t.Fatalf("events id %q revision %d, want %d", m.id, evs.Revision, c.Status.Revision)
	}
	if len(evs.Events) != 1 {
		t.Fatalf("events %+v, want c's creation", evs.Events)
	}
	ev := evs.Events[0]
	if ev.Kind != "created" || ev.Name != "c" || ev.Rev != c.Status.Revision || !ev.Ready || ev.Target == nil || ev.Target.Labels["tier"] != "web" {
		t.Fatalf("event %+v (target %+v), want c created, ready, with its labels", ev, ev.Target)
	}
}

func TestEventsResumeFromLastEventID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		resume func(id string) (http.Header, string)
	}{
		{"Last-Event-ID", func(id string) (http.Header, string) { return http.Header{"Last-Event-Id": {id}}, "" }},
		{"after", func(id string) (http.Header, string) { return nil, "after=" + id }},
		{"Last-Event-ID before after", func(id string) (http.Header, string) {
			return http.Header{"Last-Event-Id": {id}}, "after=0"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPage(t, pageOptions{})
			p.create(t, &target.Spec{Name: "a"})
			first := p.openStream(t, nil, "")
			_, m := readSnapshot(t, first, "new stream")
			first.resp.Body.Close() // the connection drops

			// What happens while the page is away.
			var want []uint64
			want = append(want, p.create(t, &target.Spec{Name: "b"}).Status.Revision)
			up, err := p.eng.Update(t.Context(), &target.Spec{Name: "a", Labels: map[string]string{"v": "2"}})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, up.Status.Revision)
			want = append(want, p.create(t, &target.Spec{Name: "c"}).Status.Revision)

			header, query := tt.resume(m.id)
			s := p.openStream(t, header, query)
			if m := s.next(); m.retry != "1000" {
				t.Fatalf("first message %+v, want retry", m)
			}
			var evs eventsJSON
			m = s.nextEvent("events", &evs) // not reset, not snapshot
			var got []uint64
			for _, ev := range evs.Events {
				got = append(got, ev.Rev)
			}
			if !slices.Equal(got, want) || m.id != revID(want[len(want)-1]) {
				t.Fatalf("resumed with events %v (id %s), want exactly %v", got, m.id, want)
			}
			if evs.Events[1].Kind != "updated" || evs.Events[1].Target.Labels["v"] != "2" {
				t.Fatalf("event %+v, want a's update", evs.Events[1])
			}
			// Then live, with no gap and no duplicate at the seam.
			d := p.create(t, &target.Spec{Name: "d"})
			m = s.nextEvent("events", &evs)
			if len(evs.Events) != 1 || evs.Events[0].Rev != d.Status.Revision || m.id != revID(d.Status.Revision) {
				t.Fatalf("live events %+v (id %s), want only d at %d", evs.Events, m.id, d.Status.Revision)
			}
		})
	}
}

func TestEventsResumeFromCompactedRevisionStartsOver(t *testing.T) {
	t.Parallel()
	p := newPage(t, pageOptions{engine: engine.Options{History: 2}})
	for i := range 5 {
		p.create(t, &target.Spec{Name: fmt.Sprintf("t%d", i)})
	}
	s := p.openStream(t, http.Header{"Last-Event-Id": {"1"}}, "")
	targets, _ := readSnapshot(t, s, "compacted")
	if len(targets) != 5 {
		t.Fatalf("snapshot of %d targets, want 5", len(targets))
	}
}

func TestEventsBadResumeRevision(t *testing.T) {
	t.Parallel()
	p := newPage(t, pageOptions{})
	for _, req := range []struct{ header, query string }{{header: "x"}, {query: "after=-1"}} {
		r, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.url+"/api/events?"+req.query, nil)
		if err != nil {
			t.Fatal(err)
		}
		if req.header != "" {
			r.Header.Set("Last-Event-ID", req.header)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%+v: %s, want 400", req, resp.Status)
		}
	}
}

func TestEventsProgressOnIdleStream(t *testing.T) {
	t.Parallel()
	p := newPage(t, pageOptions{})
	a := p.create(t, &target.Spec{Name: "a"})
	s := p.openStream(t, nil, "")
	readSnapshot(t, s, "new stream")
	// The stats ticker and the stream's idle timer.
	if err := p.clock.BlockUntilContext(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	p.clock.Advance(ui.DefaultProgressInterval)
	var prog struct{ Revision uint64 }
	m := s.nextEvent("progress", &prog)
	if prog.Revision != a.Status.Revision || m.id != revID(a.Status.Revision) {
		t.Fatalf("progress %+v id %q, want revision %d", prog, m.id, a.Status.Revision)
	}
}

func TestEventsEndWhenProbedStops(t *testing.T) {
	t.Parallel()
	p := newPage(t, pageOptions{})
	s := p.openStream(t, nil, "")
	readSnapshot(t, s, "new stream")
	p.probed.Stop()
	if !s.ended() {
		t.Fatal("the stream did not end when the engine stopped")
	}
}

func TestStatsOnlyForTargetsWhoseProbesRan(t *testing.T) {
	t.Parallel()
	p := newPage(t, pageOptions{})
	port := probedtest.Accepting(t)
	p.create(t, tcpTarget("a", port))
	p.create(t, tcpTarget("b", port))
	p.create(t, &target.Spec{Name: "no-probes"})
	if _, _, err := p.eng.Trigger(t.Context(), "a", probe.Readiness); err != nil {
		t.Fatal(err)
	}
	s := p.openStream(t, nil, "")
	readSnapshot(t, s, "new stream")

	// The first page connected: figures at once, only for a.
	wantStats(t, s, map[string]uint64{"a": 1})

	// b runs: the next refresh sends b only.
	if _, _, err := p.eng.Trigger(t.Context(), "b", probe.Readiness); err != nil {
		t.Fatal(err)
	}
	p.clock.Advance(ui.DefaultStatsInterval)
	wantStats(t, s, map[string]uint64{"b": 1})
}

// wantStats reads up to the next stats message (skipping the probes'
// events) and checks which targets it has and their readiness probe's run
// count.
func wantStats(t *testing.T, s *stream, want map[string]uint64) {
	t.Helper()
	m := s.next()
	for m.event == "events" {
		m = s.next()
	}
	var st statsJSON
	if m.event != "stats" {
		t.Fatalf("got %q message (%s), want stats", m.event, m.data)
	}
	if err := json.Unmarshal([]byte(m.data), &st); err != nil {
		t.Fatal(err)
	}
	got := make(map[string]uint64)
	for _, tg := range st.Targets {
		r := tg.Probes["readiness"]
		got[tg.Name] = r.Total
		if len(r.Latencies) != int(min(r.Total, engine.RecentSamples)) || len(r.Results) != len(r.Latencies) || r.Results[len(r.Results)-1] != 's' {
			t.Errorf("stats of %s: %+v, want %d recent successful runs", tg.Name, r, r.Total)
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("stats for %v, want %v", got, want)
	}
}
