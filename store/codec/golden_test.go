package codec_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	storagev1 "github.com/probed/probed/proto/probed/storage/v1"
	"github.com/probed/probed/store/codec"
	"github.com/probed/probed/store/storetest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from this build's codec")

// ignoreChangeInternals: the unexported fields of engine.Change are the
// engine's bookkeeping, never stored.
var ignoreChangeInternals = cmpopts.IgnoreUnexported(engine.Change{})

// golden is a fixed value and its stored form, testdata/<name>.bin, with a
// readable dump of it in testdata/<name>.txt.
type golden struct {
	name string
	// value is what is marshalled: *target.Spec, *engine.Status,
	// *engine.Target, *engine.Event or a batch.
	value any
	// msg is the message type of the stored form, for the dump.
	msg proto.Message
}

var zone = time.FixedZone("UTC+1", 3600)

func at(sec int) time.Time { return time.Date(2026, 3, 1, 12, 0, sec, 123456789, zone) }

func ptr[T any](v T) *T { return &v }

// webSpec sets every field of a spec, every *Milliseconds field (one to 0,
// one negative) and a preStop sleep of 0.
func webSpec() *target.Spec {
	s := storetest.WebSpec("web")
	s.StartupProbe.Handler.HTTPGet.Headers = append(s.StartupProbe.Handler.HTTPGet.Headers, probe.Header{Name: "Accept", Value: ""})
	s.StartupProbe.Handler.HTTPGet.DisableKeepAlive = true
	s.StartupProbe.Handler.HTTPGet.TLS.CAPEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	s.StartupProbe.InitialDelaySeconds = 2
	s.StartupProbe.TimeoutSeconds = 3
	s.StartupProbe.SuccessThreshold = 1
	s.StartupProbe.InitialPeriodSeconds = ptr[int32](0)
	s.ReadinessProbe.Handler.GRPC.TLS.ServerName = "web.internal"
	return s
}

// jobSpec has an exec probe, a gRPC service name and no lifecycle or
// grace period (unset, not 0).
func jobSpec() *target.Spec {
	return &target.Spec{
		Name: "job",
		LivenessProbe: &probe.Spec{
			Handler:       probe.Handler{Exec: &probe.Exec{Command: []string{"/bin/check", "--quick", ""}}},
			PeriodSeconds: 5, FailureThreshold: 2,
		},
		ReadinessProbe: &probe.Spec{
			Handler: probe.Handler{GRPC: &probe.GRPC{Host: "job.internal", Port: 9000, Service: ptr("job.v1.Runner")}},
		},
	}
}

// terminating is a status with every durable field set, and live ones
// that are not stored.
func terminating() engine.Status {
	st := engine.Status{
		Phase: engine.Terminating, CreateTime: at(0), Client: "alice", StartTime: at(10), DeleteTime: at(60),
		DeletionGracePeriod: ptr(5 * time.Second), Revision: 1234567,
	}
	st.Probes[probe.Startup] = engine.ProbeStatus{Present: true, Result: probe.Success, HasInitialized: true, LastTransitionTime: at(11)}
	st.Probes[probe.Liveness] = engine.ProbeStatus{Present: true, Result: probe.Failure, HasInitialized: true, LastTransitionTime: at(40),
		ConsecutiveFailures: 3, LastMessage: "not stored", LastProbeTime: at(59), ProbesTotal: 99}
	st.Probes[probe.Readiness] = engine.ProbeStatus{Present: true, Result: probe.Failure}
	return st
}

func goldens() []golden {
	web := &engine.Target{Spec: webSpec(), Status: terminating()}
	created := storetest.Create(webSpec(), at(0))
	created.SetRevision(41)
	created.Target.Status.Client = "alice"
	tr := storetest.Transition(created.Target, probe.Readiness, probe.Success, 2, at(5))
	tr.SetRevision(42)
	tr.Event.Message = "HTTP probe succeeded with statuscode: 200"
	return []golden{
		{"spec-web", webSpec(), &storagev1.Spec{}},
		{"spec-job", jobSpec(), &storagev1.Spec{}},
		{"status-terminating", ptr(terminating()), &storagev1.Status{}},
		{"target-web", web, &storagev1.Target{}},
		{"target-nospec", &engine.Target{Status: engine.Status{Phase: engine.Active}}, &storagev1.Target{}},
		{"event-created", &created.Event, &storagev1.Event{}},
		{"event-transition", &tr.Event, &storagev1.Event{}},
		{"event-deleted", &storetest.Delete("web", at(70)).Event, &storagev1.Event{}},
		{"batch", goldenBatch(), &storagev1.Batch{}},
	}
}

// batch is a value of MarshalBatch: the changes of one transaction.
type batch []*engine.Change

// goldenBatch is a transaction of every shape of change: a create (the
// event carries the target), a status-only transition, a status-only
// lifecycle change (its event carries the target, spec included), an
// update whose event does not carry the target, and a delete without a
// target. Revisions are set, as Commit sets them, and not stored.
func goldenBatch() batch {
	created := storetest.Create(webSpec(), at(0))
	created.Create = true
	created.Target.Status.Client = "alice"
	tr := storetest.Transition(created.Target, probe.Readiness, probe.Success, 2, at(5))
	tm := storetest.Terminate(tr.Target, at(6))
	upd := storetest.Update(&engine.Target{Spec: jobSpec(), Status: storetest.NewStatus(jobSpec(), at(1))}, jobSpec(), at(7))
	upd.Event.Target = nil
	del := storetest.Delete("old", at(8))
	b := batch{created, tr, tm, upd, del}
	for i, c := range b {
		c.SetRevision(uint64(100<<10 | i))
	}
	return b
}

// durableBatch is what UnmarshalBatch returns for b: durable values, no
// revisions, and the spec of a change only when it changed or its event
// carries the target.
func durableBatch(b batch) batch {
	out := make(batch, len(b))
	for i, c := range b {
		d := &engine.Change{Name: c.Name, Delete: c.Delete, SpecChanged: c.SpecChanged, Create: c.Create}
		d.Event = storetest.DurableEvent(c.Event)
		d.Event.Revision = 0
		if d.Event.Target != nil {
			d.Event.Target.Status.Revision = 0
		}
		switch {
		case c.Target != nil && c.Target == c.Event.Target:
			d.Target = d.Event.Target
		case c.Target != nil:
			d.Target = storetest.Durable(c.Target)
			d.Target.Status.Revision = 0
			if !c.SpecChanged {
				d.Target.Spec = nil
			}
		}
		out[i] = d
	}
	return out
}

func marshalAny(v any) ([]byte, error) {
	switch v := v.(type) {
	case *target.Spec:
		return codec.MarshalSpec(v)
	case *engine.Status:
		return codec.MarshalStatus(v)
	case *engine.Target:
		return codec.MarshalTarget(v)
	case *engine.Event:
		return codec.MarshalEvent(v)
	case batch:
		return codec.MarshalBatch(v)
	}
	panic(fmt.Sprintf("no codec for %T", v))
}

// unmarshalLike decodes b into a new value of like's type.
func unmarshalLike(b []byte, like any) (any, error) {
	switch like.(type) {
	case *target.Spec:
		var v target.Spec
		return &v, codec.UnmarshalSpec(b, &v)
	case *engine.Status:
		var v engine.Status
		return &v, codec.UnmarshalStatus(b, &v)
	case *engine.Target:
		var v engine.Target
		return &v, codec.UnmarshalTarget(b, &v)
	case *engine.Event:
		var v engine.Event
		return &v, codec.UnmarshalEvent(b, &v)
	case batch:
		v, err := codec.UnmarshalBatch(b)
		return batch(v), err
	}
	panic(fmt.Sprintf("no codec for %T", like))
}

// durable returns v without the live fields.
func durable(v any) any {
	switch v := v.(type) {
	case *engine.Status:
		return ptr(storetest.DurableStatus(*v))
	case *engine.Target:
		return storetest.Durable(v)
	case *engine.Event:
		return ptr(storetest.DurableEvent(*v))
	case batch:
		return durableBatch(v)
	}
	return v
}

// TestGolden pins the format: Marshal of each fixed value returns the bytes
// of its golden file, the golden bytes decode to the value, and the .txt
// dump is the dump of the golden bytes. A deliberate format change
// rewrites them with -update (review the .txt diff); old data must still
// decode, so a change that is not an addition needs a new Version.
func TestGolden(t *testing.T) {
	for _, g := range goldens() {
		t.Run(g.name, func(t *testing.T) {
			bin, txt := filepath.Join("testdata", g.name+".bin"), filepath.Join("testdata", g.name+".txt")
			got, err := marshalAny(g.value)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if *update {
				writeFile(t, bin, got)
				writeFile(t, txt, []byte(dump(t, got, g.msg)))
			}
			want := readFile(t, bin)
			if !bytes.Equal(got, want) {
				t.Errorf("Marshal of %s differs from %s: the stored format changed. If that is deliberate, "+
					"run go test ./store/codec -update and review the diff of %s.\n(-golden +now):\n%s",
					g.name, bin, txt, cmp.Diff(dump(t, want, g.msg), dump(t, got, g.msg)))
			}
			if d := dump(t, want, g.msg); d != string(readFile(t, txt)) {
				t.Errorf("%s is not the dump of %s (-file +dump):\n%s", txt, bin, cmp.Diff(string(readFile(t, txt)), d))
			}
			back, err := unmarshalLike(want, g.value)
			if err != nil {
				t.Fatalf("Unmarshal of %s: %v", bin, err)
			}
			if diff := cmp.Diff(durable(g.value), back, ignoreChangeInternals); diff != "" {
				t.Errorf("Unmarshal of %s (-want +got):\n%s", bin, diff)
			}
		})
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("%v (run go test ./store/codec -update to write the golden files)", err)
	}
	return b
}

func writeFile(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// dump renders a stored value readably and deterministically (prototext
// is not stable across builds): its version, size and every field set, in
// field-number order, map entries by key; times and durations with their
// reading in a comment.
func dump(t *testing.T, b []byte, like proto.Message) string {
	t.Helper()
	m := like.ProtoReflect().New()
	if len(b) == 0 || proto.Unmarshal(b[1:], m.Interface()) != nil {
		t.Fatalf("dump: %x is not a stored %s", b, m.Descriptor().FullName())
	}
	var w strings.Builder
	fmt.Fprintf(&w, "# %s, format version %d, %d bytes\n", m.Descriptor().FullName(), b[0], len(b))
	dumpMessage(&w, m, "")
	return w.String()
}

func dumpMessage(w *strings.Builder, m protoreflect.Message, indent string) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		switch {
		case fd.IsMap():
			mp := v.Map()
			var keys []protoreflect.MapKey
			mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool { keys = append(keys, k); return true })
			slices.SortFunc(keys, func(a, b protoreflect.MapKey) int { return strings.Compare(a.String(), b.String()) })
			for _, k := range keys {
				fmt.Fprintf(w, "%s%s: {key: %s, value: %s}\n", indent, fd.Name(), strconv.Quote(k.String()), scalar(fd.MapValue(), mp.Get(k)))
			}
		case fd.IsList():
			l := v.List()
			for j := range l.Len() {
				dumpValue(w, fd, l.Get(j), indent)
			}
		default:
			dumpValue(w, fd, v, indent)
		}
	}
}

func dumpValue(w *strings.Builder, fd protoreflect.FieldDescriptor, v protoreflect.Value, indent string) {
	if fd.Kind() == protoreflect.MessageKind && flat(v.Message()) {
		var parts []string
		fields := v.Message().Descriptor().Fields()
		for i := range fields.Len() {
			if f := fields.Get(i); v.Message().Has(f) {
				parts = append(parts, fmt.Sprintf("%s: %s", f.Name(), scalar(f, v.Message().Get(f))))
			}
		}
		fmt.Fprintf(w, "%s%s: {%s}\n", indent, fd.Name(), strings.Join(parts, ", "))
		return
	}
	if fd.Kind() == protoreflect.MessageKind {
		fmt.Fprintf(w, "%s%s: {\n", indent, fd.Name())
		dumpMessage(w, v.Message(), indent+"  ")
		fmt.Fprintf(w, "%s}\n", indent)
		return
	}
	fmt.Fprintf(w, "%s%s: %s%s\n", indent, fd.Name(), scalar(fd, v), comment(fd, v))
}

// flat reports whether m is small enough for one line: at most three
// fields set, none a message or a list, none a time.
func flat(m protoreflect.Message) bool {
	n, ok := 0, true
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		n++
		ok = fd.Kind() != protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() && comment(fd, protoreflect.ValueOfInt64(0)) == ""
		return ok && n <= 3
	})
	return ok && n <= 3
}

func scalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return strconv.Quote(v.String())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return strconv.Itoa(int(v.Enum()))
	default:
		return v.String()
	}
}

func comment(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	name := string(fd.Name())
	switch {
	case strings.HasSuffix(name, "_unix_nano"):
		return "  # " + time.Unix(0, v.Int()).UTC().Format(time.RFC3339Nano)
	case strings.HasSuffix(name, "_nanos"):
		return "  # " + time.Duration(v.Int()).String()
	}
	return ""
}
