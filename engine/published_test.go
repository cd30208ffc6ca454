package engine

import (
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// TestRecordRoundTrip: a Target made of the record of a Target is that
// Target, but for what a record leaves to be derived on read (Effective,
// filled in by the function given) and Recent (never published).
func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC)
	grace := 3 * time.Second
	spec := &target.Spec{Name: "web", Labels: map[string]string{"app": "web"},
		ReadinessProbe: &probe.Spec{Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: "127.0.0.1", Port: 80}}, PeriodSeconds: 5},
		LivenessProbe:  &probe.Spec{Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: "127.0.0.1", Port: 81}}},
	}
	probed := ProbeStatus{Present: true, Result: probe.Success, HasInitialized: true, LastTransitionTime: now,
		ConsecutiveSuccesses: 2, ConsecutiveFailures: 0, LastProbeTime: now.Add(time.Second),
		LastMessage: "HTTP probe succeeded with status code 200", LastLatency: time.Millisecond, ProbesTotal: 7}
	tests := []struct {
		name   string
		status Status
	}{
		{name: "zero", status: Status{}},
		{name: "created", status: Status{Phase: Active, CreateTime: now, StartTime: now, Client: "alice", Owner: "set",
			Probes: [probe.NumTypes]ProbeStatus{probe.Readiness: {Present: true, Result: probe.Failure}}}},
		{name: "probed", status: Status{Phase: Active, CreateTime: now, StartTime: now.Add(time.Minute), Revision: 42,
			Probes: [probe.NumTypes]ProbeStatus{probe.Readiness: probed, probe.Liveness: {Present: true, Result: probe.Success}}}},
		{name: "every probe", status: Status{Phase: Active, Revision: 1,
			Probes: [probe.NumTypes]ProbeStatus{probe.Startup: probed, probe.Readiness: probed, probe.Liveness: probed}}},
		{name: "an absent probe's fields", status: Status{Phase: Active,
			Probes: [probe.NumTypes]ProbeStatus{probe.Startup: {Result: probe.Unknown, LastTransitionTime: now}}}},
		{name: "terminating", status: Status{Phase: Terminating, CreateTime: now, DeleteTime: now.Add(time.Hour),
			DeletionGracePeriod: &grace, Probes: [probe.NumTypes]ProbeStatus{probe.Readiness: probed}}},
		{name: "deleted, phase unset", status: Status{DeleteTime: now}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &Target{Spec: spec, Status: tt.status}
			r := newRecord(in)
			if got := r.target(nil); !reflect.DeepEqual(got, in) {
				t.Errorf("target of its record:\n got %+v\nwant %+v", got.Status, in.Status)
			}
			if r.Ready() != in.Status.Ready() || r.Started() != in.Status.Started() {
				t.Errorf("record ready %v started %v; status ready %v started %v", r.Ready(), r.Started(), in.Status.Ready(), in.Status.Started())
			}
			effective := func(p *probe.Spec) probe.Effective { return p.Effective() }
			got := r.target(effective)
			for _, typ := range probe.Types {
				want := probe.Effective{}
				if p := spec.Probe(typ); p != nil {
					want = p.Effective()
				}
				if got.Status.Probes[typ].Effective != want {
					t.Errorf("%s: effective %+v; want %+v", typ, got.Status.Probes[typ].Effective, want)
				}
			}
		})
	}
}

// TestRecordSize: a record of an Active target fits in 128 bytes and a
// probe's in 96 (the allocator's size classes), against 640 for a Target.
func TestRecordSize(t *testing.T) {
	t.Parallel()
	if n := unsafe.Sizeof(record{}); n > 128 {
		t.Errorf("record is %d bytes; want at most 128", n)
	}
	if n := unsafe.Sizeof(probeRecord{}); n > 96 {
		t.Errorf("probeRecord is %d bytes; want at most 96", n)
	}
	r := newRecord(&Target{Spec: nameOnly("a"), Status: Status{Phase: Active, Probes: [probe.NumTypes]ProbeStatus{probe.Readiness: {Present: true}}}})
	if r.deleted != nil || len(r.probes) != 1 {
		t.Errorf("record of an active target with one probe: deleted %v, %d probes; want nil, 1", r.deleted, len(r.probes))
	}
}

// TestPublishSharesOneRecord: the view, the history's lifecycle event and
// the entry the change was built from hold one record of a committed
// target, not a copy each.
func TestPublishSharesOneRecord(t *testing.T) {
	t.Parallel()
	f := newFeed(10, 0)
	en := &entry{name: "a"}
	tg := &Target{Spec: nameOnly("a"), Status: Status{Phase: Active, Revision: 3}}
	en.status, en.built = &tg.Status, tg
	c := &Change{Name: "a", Target: tg, Event: Event{Revision: 3, Name: "a", Kind: KindCreated, Target: tg}, entry: en}
	en.adopt(c)
	f.publish([]*Change{c})
	view, ok := f.view.Get(named("a"))
	if !ok {
		t.Fatal("not in the view")
	}
	if view != en.rec || f.hist.records[0] != view || en.status != nil {
		t.Errorf("view %p, history %p, entry %p (status %v): want one record", view, f.hist.records[0], en.rec, en.status)
	}
	if f.hist.buf[0].Target != nil {
		t.Error("the history holds the event's Target besides its record")
	}
}

// TestBareRecordsShareProbes: records whose probes have nothing but a
// result (just created) share one probe list; a probe with figures
// makes a list of the record's own.
func TestBareRecordsShareProbes(t *testing.T) {
	t.Parallel()
	created := func(name string) *record {
		return newRecord(&Target{Spec: nameOnly(name), Status: Status{Phase: Active,
			Probes: [probe.NumTypes]ProbeStatus{probe.Liveness: {Present: true, Result: probe.Success}, probe.Readiness: {Present: true, Result: probe.Failure}}}})
	}
	a, b := created("a"), created("b")
	if len(a.probes) != 2 || &a.probes[0] != &b.probes[0] {
		t.Errorf("two records of created targets: %d probes, lists at %p and %p; want 2, one list", len(a.probes), &a.probes[0], &b.probes[0])
	}
	probed := created("c").target(nil)
	probed.Status.Probes[probe.Readiness].ProbesTotal = 1
	if c := newRecord(probed); &c.probes[0] == &a.probes[0] || c.probes[1].total != 1 {
		t.Errorf("a probed target's record shares the bare list")
	}
	if got := b.target(nil).Status; got.Probes[probe.Liveness].Result != probe.Success || got.Probes[probe.Readiness].Result != probe.Failure || got.Probes[probe.Startup].Present {
		t.Errorf("status of a bare record: %+v", got.Probes)
	}
}
