package bolt_test

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	bbolt "go.etcd.io/bbolt"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/bolt"
	"github.com/probed/probed/store/codec"
	"github.com/probed/probed/store/storetest"
)

// schema1File is a data file of schema 1 (JSON values), written by the
// schema 1 store from schema1History (at commit a144db9, with go test -run
// TestWriteSchema1Fixture ./store/bolt -args -write-schema1).
const schema1File = "testdata/schema1.db"

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

	create := func(spec *target.Spec, ms int, client string) *engine.Change {
		c := storetest.Create(spec, s1at(ms))
		c.Target.Status.Client = client
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

// TestUpgradeSchema1: Open upgrades a schema 1 data file in place; Load
// then returns exactly what the history wrote, and the file holds what a
// new store that replays the history holds, byte for byte (revision and
// compaction mark included). The next Open has nothing to upgrade.
func TestUpgradeSchema1(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, bolt.FileName)
	writeFile(t, path, readFile(t, schema1File))
	var logs bytes.Buffer
	s := mustOpen(t, dir, bolt.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	got, err := s.Load(t.Context())
	closeStore(t, s)
	if err != nil {
		t.Fatalf("Load() of the upgraded schema 1 file = %v", err)
	}
	t.Logf("log:\n%s", logs.String())
	for _, want := range []string{
		"upgrading the data file to the current schema", "from_schema=1 to_schema=2",
		"upgraded the data file", "targets=4 statuses=4 events=11",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("Open's log lacks %q", want)
		}
	}

	freshDir := t.TempDir()
	fresh := mustOpen(t, freshDir)
	replaySchema1(t, fresh)
	want, err := fresh.Load(t.Context())
	closeStore(t, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Load() of the upgraded schema 1 file differs from the history it was written from (-want +got):\n%s", diff)
	}
	if got.Revision != 18 || got.Compacted != 7 || len(got.Events) != 11 || len(got.Targets) != 4 {
		t.Errorf("Load() = revision %d, compacted %d, %d events, %d targets; want 18, 7, 11, 4",
			got.Revision, got.Compacted, len(got.Events), len(got.Targets))
	}
	if diff := cmp.Diff(contents(t, filepath.Join(freshDir, bolt.FileName)), contents(t, path)); diff != "" {
		t.Errorf("the upgraded file differs from a new file of the same history (-new +upgraded):\n%s", diff)
	}

	logs.Reset()
	s = mustOpen(t, dir, bolt.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	defer closeStore(t, s)
	if logs.Len() != 0 {
		t.Errorf("second Open logged %q, want nothing (no upgrade)", logs.String())
	}
	c := storetest.Delete("db", s1at(8000))
	if err := s.Commit(t.Context(), []*engine.Change{c}); err != nil {
		t.Fatal(err)
	}
	if c.Event.Revision != 19 {
		t.Errorf("first commit after the upgrade got revision %d, want 19", c.Event.Revision)
	}
}

// TestUpgradeFailsWhole: a schema 1 value that does not decode fails Open
// with ErrCorrupt naming it, and leaves the file exactly as it was.
func TestUpgradeFailsWhole(t *testing.T) {
	for _, tc := range []struct {
		name        string
		bucket, key []byte
		value       string
		want        error
		msg         string
	}{
		{"Event", []byte("events"), []byte{0, 0, 0, 0, 0, 0, 0, 12}, `{"revision":12,"kind":"NOPE"}`, bolt.ErrCorrupt, "schema 1 event 12"},
		{"Spec", []byte("specs"), []byte("job"), `{"name":`, bolt.ErrCorrupt, `schema 1 spec of target "job"`},
		{"Status", []byte("statuses"), []byte("db"), `{"createTime":"3000-01-01T00:00:00Z"}`, codec.ErrUnencodable,
			`upgrade to schema 2: status of target "db": status.createTime`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, bolt.FileName)
			writeFile(t, path, readFile(t, schema1File))
			rewrite(t, path, func(tx *bbolt.Tx) error { return tx.Bucket(tc.bucket).Put(tc.key, []byte(tc.value)) })
			before := contents(t, path)
			s, err := bolt.Open(dir)
			if err == nil {
				closeStore(t, s)
				t.Fatal("Open() = nil error, want the upgrade to fail")
			}
			t.Logf("error: %v", err)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Open() = %v, want %v naming %s and %q", err, tc.want, path, tc.msg)
			}
			if diff := cmp.Diff(before, contents(t, path)); diff != "" {
				t.Errorf("a failed upgrade changed the file (-before +after):\n%s", diff)
			}
		})
	}
}

// contents returns every key and value of the data file at path, by bucket.
func contents(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	out := map[string]map[string]string{}
	err = db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			kv := map[string]string{}
			out[string(name)] = kv
			return b.ForEach(func(k, v []byte) error {
				kv[string(k)] = string(v)
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
