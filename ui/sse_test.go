package ui_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/ui"
)

func revID(rev uint64) string { return strconv.FormatUint(rev, 10) }

// readSnapshot reads the start of a new stream (retry, about, reset,
// snapshot, recent) and returns the snapshot's targets and its last message.
func readSnapshot(t *testing.T, s *stream, wantReason string) ([]targetJSON, sseMsg) {
	t.Helper()
	targets, m, _ := readSnapshotRecent(t, s, wantReason)
	return targets, m
}

// readSnapshotRecent is readSnapshot returning the recent message too.
func readSnapshotRecent(t *testing.T, s *stream, wantReason string) ([]targetJSON, sseMsg, recentJSON) {
	t.Helper()
	if m := s.next(); m.retry != "1000" {
		t.Fatalf("first message %+v, want retry: 1000", m)
	}
	s.nextEvent("about", nil)
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
		var recent recentJSON
		if rm := s.nextEvent("recent", &recent); rm.hasID {
			t.Fatalf("recent message has id %q, want none", rm.id)
		}
		return targets, m, recent
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
			s.nextEvent("about", nil)
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

// TestRecentPast: after its snapshot a new stream gets the latest events
// for the feed and the readiness timelines of the targets whose readiness
// changed in the window, from the retained history.
func TestRecentPast(t *testing.T) {
	t.Parallel()
	p := newPage(t, pageOptions{})
	engineClock := p.probed.Clock.(*clockwork.FakeClock)
	b := probedtest.NewBackend(t, true)
	spec := func(name string) *target.Spec {
		return &target.Spec{Name: name, ReadinessProbe: &probe.Spec{
			Handler:             probe.Handler{HTTPGet: &probe.HTTPGet{Host: "127.0.0.1", Port: b.Port(), Path: "/healthz"}},
			FailureThreshold:    1,
			InitialDelaySeconds: 3600, // runs when triggered only
		}}
	}
	trigger := func(name string) {
		t.Helper()
		if _, _, err := p.eng.Trigger(t.Context(), name, probe.Readiness); err != nil {
			t.Fatal(err)
		}
	}
	p.create(t, spec("steady"))
	trigger("steady")
	p.create(t, spec("late-flap"))
	trigger("late-flap")

	// Ten minutes later: only what happens now is in the window.
	engineClock.Advance(10 * time.Minute)
	p.clock.Advance(10 * time.Minute)
	b.SetHealthy(false)
	trigger("late-flap")
	p.create(t, spec("flappy"))
	b.SetHealthy(true)
	trigger("late-flap")
	trigger("flappy")
	p.create(t, &target.Spec{Name: "gone"})
	deleted, err := p.eng.Watch(t.Context(), engine.WatchOptions{Since: p.eng.Revision() + 1, Names: []string{"gone"}, Kinds: []engine.EventKind{engine.KindDeleted}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.eng.Delete(t.Context(), "gone"); err != nil {
		t.Fatal(err)
	}
	// Delete returns once the target is terminating; with nothing to drain
	// it is removed right after, on the engine's goroutine: wait for that.
	if b, err := deleted.Next(t.Context()); err != nil || len(b.Events) == 0 {
		t.Fatalf("waiting for gone's deletion: %+v, %v", b, err)
	}
	deleted.Close()

	s := p.openStream(t, nil, "")
	_, snap, recent := readSnapshotRecent(t, s, "new stream")
	now := p.clock.Now()
	if recent.To != now.UnixMilli() || recent.From != now.Add(-ui.DefaultTimelineWindow).UnixMilli() {
		t.Errorf("window %d..%d, want the last %v before %d", recent.From, recent.To, ui.DefaultTimelineWindow, now.UnixMilli())
	}

	states := func(changes [][2]int64) []int64 {
		var out []int64
		for _, c := range changes {
			out = append(out, c[1])
		}
		return out
	}
	got := map[string]string{}
	for name, tl := range recent.Timelines {
		start := "unknown"
		if tl.Start != nil {
			start = fmt.Sprint(*tl.Start)
		}
		got[name] = fmt.Sprintf("start %s, created %t, states %v", start, tl.Created != 0, states(tl.Changes))
	}
	want := map[string]string{
		"late-flap": "start 1, created false, states [0 1]", // ready before the window, failed and passed in it
		"flappy":    "start unknown, created true, states [0 1]",
		// steady changed before the window only; gone is gone.
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("timelines (-want +got):\n%s", diff)
	}

	var kinds []string
	last := uint64(0)
	for _, ev := range recent.Events {
		if ev.Rev <= last {
			t.Errorf("events out of order: %d after %d", ev.Rev, last)
		}
		last = ev.Rev
		kinds = append(kinds, ev.Name+" "+ev.Kind)
	}
	wantKinds := []string{
		"steady created", "steady transition", "late-flap created", "late-flap transition",
		"late-flap transition", "flappy created", "late-flap transition", "flappy transition",
		"gone created", "gone terminating", "gone deleted",
	}
	if diff := cmp.Diff(wantKinds, kinds); diff != "" {
		t.Errorf("recent events (-want +got):\n%s", diff)
	}
	if revID(last) != snap.id {
		t.Errorf("last recent event %d, want the snapshot's revision %s", last, snap.id)
	}
}

// TestAboutFirstOnEveryStream: every stream, resumed or not, starts by
// saying which probed serves the page: its version and API address, and
// its replica in cluster mode.
func TestAboutFirstOnEveryStream(t *testing.T) {
	about := ui.About{Version: "v0.1.0-test", Addr: "127.0.0.1:50051"}
	type aboutJSON struct{ Version, Addr, Replica string }
	for _, tt := range []struct {
		name    string
		cluster ui.Cluster
		resume  string
		want    aboutJSON
	}{
		{name: "single node", want: aboutJSON{Version: about.Version, Addr: about.Addr}},
		{name: "resumed", resume: "1", want: aboutJSON{Version: about.Version, Addr: about.Addr}},
		{name: "replica", cluster: &replicas{self: "r1"}, want: aboutJSON{Version: about.Version, Addr: about.Addr, Replica: "r1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPage(t, pageOptions{about: about, cluster: tt.cluster})
			p.create(t, &target.Spec{Name: "a"})
			var header http.Header
			if tt.resume != "" {
				header = http.Header{"Last-Event-ID": {tt.resume}}
			}
			s := p.openStream(t, header, "")
			if m := s.next(); m.retry != "1000" {
				t.Fatalf("first message %+v, want retry", m)
			}
			var got aboutJSON
			if m := s.nextEvent("about", &got); m.hasID {
				t.Errorf("about has id %q, want none", m.id)
			}
			if got != tt.want {
				t.Errorf("about = %+v, want %+v", got, tt.want)
			}
		})
	}
}
