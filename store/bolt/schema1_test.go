package bolt_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/bolt"
	"github.com/probed/probed/store/storetest"
)

// schema1File is a data file written by the schema 1 store (JSON values)
// from schema1History.
const schema1File = "testdata/schema1.db"

var writeSchema1 = flag.Bool("write-schema1", false, "write "+schema1File+" from schema1History with this build's store")

// schema1Epoch is the time the history starts at (a zone that is not UTC:
// schema 1 kept the offset, later schemas keep the instant).
var schema1Epoch = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("UTC+1", 3600))

func s1at(ms int) time.Time { return schema1Epoch.Add(time.Duration(ms) * time.Millisecond) }

func ptr[T any](v T) *T { return &v }

// schema1Step is one commit of a batch, or (when compact > 0) one
// Compact(compact).
type schema1Step struct {
	batch   []*engine.Change
	compact uint64
}

// schema1History is the history recorded in schema1File. It must never
// change: the file was written from it, and the migration test replays it
// into a new store to know what the file holds. It uses every field the
// schema 1 store kept: every handler kind and option, set pointers to 0,
// an owner, every phase, every event kind that is stored, a compaction.
func schema1History() []schema1Step {
	job := &target.Spec{
		Name:   "job",
		Labels: map[string]string{"app": "batch", "team": "data"},
		StartupProbe: &probe.Spec{
			Handler: probe.Handler{GRPC: &probe.GRPC{
				Host: "job.internal", Port: 9000, Service: ptr("job.v1.Runner"),
				TLS: &probe.TLS{ServerName: "job.internal", InsecureSkipVerify: true},
			}},
			PeriodSeconds: 2, FailureThreshold: 10, SuccessThreshold: 1,
			InitialPeriodSeconds: ptr[int32](0), InitialPeriodMilliseconds: ptr[int32](200),
		},
		LivenessProbe: &probe.Spec{
			Handler:             probe.Handler{Exec: &probe.Exec{Command: []string{"/bin/check", "--quick", ""}}},
			InitialDelaySeconds: 3, TimeoutSeconds: 1, PeriodSeconds: 5, FailureThreshold: 2,
		},
		ReadinessProbe: &probe.Spec{
			Handler: probe.Handler{HTTPGet: &probe.HTTPGet{
				Host: "job.internal", Port: 8443, Path: "/ready?full=1", Scheme: probe.SchemeHTTP,
				Headers:          []probe.Header{{Name: "Accept", Value: "text/plain"}, {Name: "X-Empty", Value: ""}},
				DisableKeepAlive: true,
			}},
			PeriodSeconds: 1, PeriodMilliseconds: ptr[int32](-900), TimeoutMilliseconds: ptr[int32](250),
			InitialDelayMilliseconds: ptr[int32](10), SuccessThreshold: 3, FailureThreshold: 1,
			InitializationFailureThreshold: ptr[int32](0),
		},
		Lifecycle: &target.Lifecycle{PreStop: &target.Handler{}},
	}
	empty := &target.Spec{Name: "empty", Lifecycle: &target.Lifecycle{}, Labels: map[string]string{"": ""}}

	create := func(spec *target.Spec, ms int, owner string) *engine.Change {
		c := storetest.Create(spec, s1at(ms))
		c.Target.Status.Owner = owner
		return c
	}
	web := create(storetest.WebSpec("web"), 0, "alice")
	db := create(storetest.TCPSpec("db"), 1, "")
	bare := create(storetest.BareSpec("bare"), 2, "bob")
	jb := create(job, 3, "alice")
	em := create(empty, 4, "")

	steps := []schema1Step{{batch: []*engine.Change{web, db, bare, jb, em}}}
	add := func(cs ...*engine.Change) { steps = append(steps, schema1Step{batch: cs}) }

	w1 := storetest.Transition(web.Target, probe.Startup, probe.Success, 1, s1at(1000))
	w2 := storetest.Transition(w1.Target, probe.Readiness, probe.Success, 2, s1at(1500))
	d1 := storetest.Transition(db.Target, probe.Readiness, probe.Failure, 3, s1at(1600))
	add(w1, w2, d1)
	j1 := storetest.Transition(jb.Target, probe.Startup, probe.Failure, 10, s1at(2000))
	j1.Event.Message = "rpc error: code = Unavailable\n\"quoted\" \u00e9\u00e8 \x7f"
	add(j1)
	// Revisions are contiguous from 1 here: 1–5 the creates, 6–8 the
	// transitions of web and db, 9 job's failure. Compact the creates and
	// web's transitions.
	steps = append(steps, schema1Step{compact: 8})
	j2 := storetest.Transition(j1.Target, probe.Startup, probe.Success, 1, s1at(3000))
	j3 := storetest.Transition(j2.Target, probe.Liveness, probe.Failure, 2, s1at(3100))
	add(j2, j3)

	upd := storetest.WebSpec("web")
	upd.Labels = map[string]string{"app": "web", "rollout": "canary"}
	upd.StartupProbe = nil
	u := storetest.Update(w2.Target, upd, s1at(4000))
	r := storetest.Reset(d1.Target, s1at(4100))
	add(u, r)
	tm := storetest.Terminate(u.Target, s1at(5000))
	tj := storetest.Terminate(j3.Target, s1at(5001))
	add(tm, tj)
	add(storetest.Delete("web", s1at(6000)), storetest.Transition(tm.Target, probe.Liveness, probe.Failure, 3, s1at(6001)))
	add(storetest.Transition(r.Target, probe.Readiness, probe.Success, 1, s1at(7000)))
	return steps
}

// replaySchema1 applies schema1History to s.
func replaySchema1(t *testing.T, s engine.Store) {
	t.Helper()
	for i, st := range schema1History() {
		var err error
		if st.compact > 0 {
			err = s.Compact(t.Context(), st.compact)
		} else {
			err = s.Commit(t.Context(), st.batch)
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}

// TestWriteSchema1Fixture writes schema1File, with -write-schema1 only. It
// was run once, by the schema 1 store (see the file's git history); the
// store of a later schema cannot write it.
func TestWriteSchema1Fixture(t *testing.T) {
	if !*writeSchema1 {
		t.Skip("run with -write-schema1 to write " + schema1File)
	}
	if bolt.SchemaVersion != 1 {
		t.Fatalf("this store writes schema %d; the fixture must be written by the schema 1 store", bolt.SchemaVersion)
	}
	dir := t.TempDir()
	s := mustOpen(t, dir)
	replaySchema1(t, s)
	closeStore(t, s)
	if err := os.MkdirAll(filepath.Dir(schema1File), 0o750); err != nil {
		t.Fatal(err)
	}
	writeFile(t, schema1File, readFile(t, filepath.Join(dir, bolt.FileName)))
}

// TestSchema1File: a schema 1 data file opens, and Load returns exactly
// what the history wrote: the same as a new store that replays it.
func TestSchema1File(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, bolt.FileName), readFile(t, schema1File))
	s := mustOpen(t, dir)
	got, err := s.Load(t.Context())
	closeStore(t, s)
	if err != nil {
		t.Fatalf("Load() of the schema 1 file = %v", err)
	}

	fresh := mustOpen(t, t.TempDir())
	replaySchema1(t, fresh)
	want, err := fresh.Load(t.Context())
	closeStore(t, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Load() of the schema 1 file differs from the history it was written from (-want +got):\n%s", diff)
	}
	if got.Revision != 18 || got.Compacted != 7 || len(got.Events) != 11 || len(got.Targets) != 4 {
		t.Errorf("Load() = revision %d, compacted %d, %d events, %d targets; want 18, 7, 11, 4",
			got.Revision, got.Compacted, len(got.Events), len(got.Targets))
	}
}
