package ui

import (
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/probedtest"
)

// statsNames returns the targets of a stats message and their run counts.
func statsNames(t *testing.T, msg []byte) map[string]uint64 {
	t.Helper()
	if msg == nil {
		return nil
	}
	var m struct{ Targets []statsView }
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatalf("stats message %s: %v", msg, err)
	}
	out := make(map[string]uint64)
	for _, tg := range m.Targets {
		out[tg.Name] = tg.Probes["readiness"].Total
	}
	return out
}

func TestStatsHub(t *testing.T) {
	srv := probedtest.Start(t, probedtest.Options{Clock: clockwork.NewFakeClock()})
	eng := srv.Engine
	port := probedtest.Accepting(t)
	for _, name := range []string{"a", "b"} {
		_, err := eng.Create(t.Context(), &target.Spec{Name: name, ReadinessProbe: &probe.Spec{
			Handler:             probe.Handler{TCPSocket: &probe.TCPSocket{Host: "127.0.0.1", Port: port}},
			InitialDelaySeconds: 3600,
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string) {
		t.Helper()
		if _, _, err := eng.Trigger(t.Context(), name, probe.Readiness); err != nil {
			t.Fatal(err)
		}
	}
	h := newStatsHub(eng, nil, slog.New(slog.DiscardHandler))
	refresh := func() {
		t.Helper()
		if err := h.refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	want := func(what string, got []byte, want map[string]uint64) {
		t.Helper()
		if g := statsNames(t, got); !maps.Equal(g, want) {
			t.Fatalf("%s: stats for %v, want %v", what, g, want)
		}
	}

	run("a")
	refresh()
	if h.seq != 0 || h.known != nil {
		t.Fatalf("with no stream, refresh computed figures (generation %d)", h.seq)
	}

	sub := h.join(nil)
	select {
	case <-h.kick:
	default:
		t.Fatal("a first stream joining does not ask for a refresh")
	}
	want("new stream, nothing computed yet", h.next(sub), nil)
	refresh()
	want("first refresh (b never ran)", h.next(sub), map[string]uint64{"a": 1})
	want("up to date", h.next(sub), nil)

	refresh()
	if h.seq != 1 {
		t.Fatalf("a refresh with no change made generation %d, want it skipped", h.seq)
	}
	want("nothing changed", h.next(sub), nil)

	run("b")
	refresh()
	want("b ran", h.next(sub), map[string]uint64{"b": 1})

	late := h.join(nil)
	select {
	case <-late.wake:
	default:
		t.Fatal("a stream joining when figures are known is not woken")
	}
	want("a stream joining later gets everything", h.next(late), map[string]uint64{"a": 1, "b": 1})

	// sub misses two generations: it gets what changed in both, once.
	run("a")
	refresh()
	want("late stream, up to date", h.next(late), map[string]uint64{"a": 2})
	run("b")
	refresh()
	want("behind by two generations", h.next(sub), map[string]uint64{"a": 2, "b": 2})
	want("late stream, one generation behind", h.next(late), map[string]uint64{"b": 2})

	if _, err := eng.Delete(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := eng.Get(t.Context(), "a"); err != nil {
			break // removed (no preStop)
		}
		refresh()
	}
	refresh()
	if got := slices.Sorted(maps.Keys(h.known)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("figures kept for %v after a was deleted, want b only", got)
	}

	h.leave(sub)
	h.leave(late)
	refresh()
	if h.seq != 0 || h.known != nil || h.delta != nil {
		t.Fatal("with no stream left, the hub still holds figures")
	}
}
