package ui_test

import (
	"encoding/json"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/ui"
)

// replicas is a cluster's membership as a test sets it: which replica
// owns which target, and the live replicas.
type replicas struct {
	mu      sync.Mutex
	self    string
	owners  map[string]string
	members []ui.Member
}

func (r *replicas) OwnerOf(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owners[name]
}

func (r *replicas) Members() []ui.Member {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ui.Member(nil), r.members...)
}

func (r *replicas) Self() string { return r.self }
func (r *replicas) Shards() int  { return 4096 }

func (r *replicas) set(owners map[string]string, members ...ui.Member) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owners, r.members = owners, members
}

type membersJSON struct {
	Self    string `json:"self"`
	Shards  int    `json:"shards"`
	Members []struct {
		ID     string `json:"id"`
		Addr   string `json:"addr"`
		Shards int    `json:"shards"`
		Joined int64  `json:"joined"`
		Self   bool   `json:"self"`
	} `json:"members"`
}

// TestClusterOwnersAndMembers: in cluster mode every target names the
// replica that probes it (snapshot, lifecycle events, stats when it moves)
// and the page gets the live replicas, again whenever they change.
func TestClusterOwnersAndMembers(t *testing.T) {
	t.Parallel()
	joined := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	rs := &replicas{self: "r1"}
	rs.set(map[string]string{"a": "r1", "b": "r2", "c": "r2"},
		ui.Member{ID: "r2", Addr: "127.0.0.1:50062", Shards: 2048, Joined: joined},
		ui.Member{ID: "r1", Addr: "127.0.0.1:50061", Shards: 2048, Joined: joined})
	p := newPage(t, pageOptions{cluster: rs})
	port := probedtest.Accepting(t)
	p.create(t, tcpTarget("a", port))
	p.create(t, tcpTarget("b", port))

	s := p.openStream(t, nil, "")
	targets, _ := readSnapshot(t, s, "new stream")
	if got, want := replicasOf(targets), map[string]string{"a": "r1", "b": "r2"}; !maps.Equal(got, want) {
		t.Fatalf("snapshot replicas %v, want %v", got, want)
	}
	var ms membersJSON
	s.nextEvent("members", &ms)
	if ms.Self != "r1" || ms.Shards != 4096 || len(ms.Members) != 2 ||
		ms.Members[0].ID != "r1" || !ms.Members[0].Self || ms.Members[0].Addr != "127.0.0.1:50061" || ms.Members[0].Shards != 2048 || ms.Members[0].Joined != joined.UnixMilli() ||
		ms.Members[1].ID != "r2" || ms.Members[1].Self {
		t.Fatalf("members %+v, want r1 (self) and r2, by id", ms)
	}
	// Targets this replica does not probe have no figures of their own,
	// but their owner: the stats name both.
	if got, want := statsReplicas(t, s), map[string]string{"a": "r1", "b": "r2"}; !maps.Equal(got, want) {
		t.Fatalf("stats replicas %v, want %v", got, want)
	}

	// A created target's event names its owner.
	p.create(t, tcpTarget("c", port))
	var evs eventsJSON
	s.nextEvent("events", &evs)
	if len(evs.Events) != 1 || evs.Events[0].Target == nil || evs.Events[0].Target.Replica == nil || *evs.Events[0].Target.Replica != "r2" {
		t.Fatalf("created event %+v, want target c on r2", evs)
	}

	// r2 leaves: its targets move to r1; the page gets the members and
	// only the moved targets.
	rs.set(map[string]string{"a": "r1", "b": "r1", "c": ""},
		ui.Member{ID: "r1", Addr: "127.0.0.1:50061", Shards: 4096, Joined: joined})
	p.clock.Advance(ui.DefaultStatsInterval)
	ms = membersJSON{}
	s.nextEvent("members", &ms)
	if len(ms.Members) != 1 || ms.Members[0].ID != "r1" || ms.Members[0].Shards != 4096 {
		t.Fatalf("members after r2 left %+v, want r1 alone with every shard", ms)
	}
	if got, want := statsReplicas(t, s), map[string]string{"b": "r1", "c": ""}; !maps.Equal(got, want) {
		t.Fatalf("stats replicas after r2 left %v, want %v (c between owners)", got, want)
	}
}

// TestSingleNodeNamesNoReplica: without a cluster the page gets no members
// and no target names a replica.
func TestSingleNodeNamesNoReplica(t *testing.T) {
	t.Parallel()
	p := newPage(t, pageOptions{})
	port := probedtest.Accepting(t)
	p.create(t, tcpTarget("a", port))
	p.create(t, &target.Spec{Name: "idle"})
	if _, _, err := p.eng.Trigger(t.Context(), "a", probe.Readiness); err != nil {
		t.Fatal(err)
	}
	s := p.openStream(t, nil, "")
	targets, _ := readSnapshot(t, s, "new stream")
	for _, tg := range targets {
		if tg.Replica != nil {
			t.Errorf("target %s names replica %q on a single node", tg.Name, *tg.Replica)
		}
	}
	m := s.next()
	for m.event == "events" {
		m = s.next()
	}
	if m.event != "stats" || strings.Contains(m.data, `"replica"`) {
		t.Fatalf("got %q message %s, want stats naming no replica (and no members message)", m.event, m.data)
	}
}

func replicasOf(targets []targetJSON) map[string]string {
	out := make(map[string]string)
	for _, tg := range targets {
		if tg.Replica != nil {
			out[tg.Name] = *tg.Replica
		}
	}
	return out
}

// statsReplicas reads the next stats message and returns the replica of
// each target in it.
func statsReplicas(t *testing.T, s *stream) map[string]string {
	t.Helper()
	var st statsJSON
	m := s.nextEvent("stats", nil)
	if err := json.Unmarshal([]byte(m.data), &st); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string)
	for _, tg := range st.Targets {
		if tg.Replica == nil {
			t.Fatalf("stats of %s name no replica in cluster mode: %s", tg.Name, m.data)
		}
		out[tg.Name] = *tg.Replica
	}
	return out
}
