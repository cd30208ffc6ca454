package codec_test

import (
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	storagev1 "github.com/probed/probed/proto/probed/storage/v1"
	"github.com/probed/probed/store/codec"
	"github.com/probed/probed/store/storetest"
)

// stored returns the version byte and m, with unknown appended to m's
// unknown fields (raw bytes a newer probed would have written).
func stored(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{codec.Version}, b...)
}

// withUnknown returns m's message with field 99 (a varint) among its unknown fields.
func withUnknown[M proto.Message](m M) M {
	r := m.ProtoReflect()
	r.SetUnknown(protowire.AppendVarint(protowire.AppendTag(r.GetUnknown(), 99, protowire.VarintType), 7))
	return m
}

func TestUnmarshalRefuses(t *testing.T) {
	event := func(m *storagev1.Event) *storagev1.Event {
		m.Name, m.Kind = "web", storagev1.EventKind_EVENT_KIND_CREATED
		return m
	}
	for _, tc := range []struct {
		name string
		b    func(t *testing.T) []byte
		want error
		// msg is part of the error's text (what and where).
		msg string
	}{
		{"Empty", func(*testing.T) []byte { return nil }, codec.ErrMalformed, "empty"},
		{"VersionZero", func(*testing.T) []byte { return []byte{0, 0x1a, 0} }, codec.ErrMalformed, "first byte 0x00"},
		{"JSON", func(*testing.T) []byte { return []byte(`{"name":"web"}`) }, codec.ErrMalformed, "first byte 0x7b"},
		{"NewerVersion", func(*testing.T) []byte { return []byte{2, 0x1a, 0} }, codec.ErrNewerFormat, "format version 2"},
		{"Truncated", func(t *testing.T) []byte {
			b := stored(t, &storagev1.Event{Name: "web"})
			return b[:len(b)-1]
		}, codec.ErrMalformed, "event"},
		{"UnknownField", func(t *testing.T) []byte { return stored(t, withUnknown(event(&storagev1.Event{}))) },
			codec.ErrNewerFormat, "event: stored value written by a newer probed: unknown field 99"},
		{"UnknownNestedField", func(t *testing.T) []byte {
			return stored(t, event(&storagev1.Event{Target: &storagev1.Target{Spec: &storagev1.Spec{
				ReadinessProbe: &storagev1.Probe{HttpGet: &storagev1.HTTPGetAction{Tls: withUnknown(&storagev1.TLSConfig{})}},
			}}}))
		}, codec.ErrNewerFormat, "event.target.spec.readinessProbe.httpGet.tls: stored value written by a newer probed: unknown field 99"},
		{"UnknownProbeStatusField", func(t *testing.T) []byte {
			return stored(t, event(&storagev1.Event{Target: &storagev1.Target{Status: &storagev1.Status{Liveness: withUnknown(&storagev1.ProbeStatus{})}}}))
		}, codec.ErrNewerFormat, "status.liveness"},
		{"UnknownLabelField", func(t *testing.T) []byte {
			return stored(t, event(&storagev1.Event{Labels: []*storagev1.Label{{Key: "a"}, withUnknown(&storagev1.Label{Key: "b"})}}))
		}, codec.ErrNewerFormat, "event.labels"},
		{"UnknownKind", func(t *testing.T) []byte { return stored(t, &storagev1.Event{Kind: 42}) }, codec.ErrNewerFormat, "event.kind"},
		{"UnknownPhase", func(t *testing.T) []byte {
			return stored(t, event(&storagev1.Event{Target: &storagev1.Target{Status: &storagev1.Status{Phase: 3}}}))
		}, codec.ErrNewerFormat, "status.phase"},
		{"UnknownScheme", func(t *testing.T) []byte {
			return stored(t, event(&storagev1.Event{Target: &storagev1.Target{Spec: &storagev1.Spec{
				StartupProbe: &storagev1.Probe{HttpGet: &storagev1.HTTPGetAction{Scheme: 5}},
			}}}))
		}, codec.ErrNewerFormat, "startupProbe.httpGet.scheme"},
		{"UnknownResult", func(t *testing.T) []byte { return stored(t, &storagev1.Event{To: 9}) }, codec.ErrNewerFormat, "event.to"},
		{"UnknownProbeType", func(t *testing.T) []byte { return stored(t, &storagev1.Event{Probe: 9}) }, codec.ErrNewerFormat, "event.probe"},
		{"LabelsFromNoTarget", func(t *testing.T) []byte { return stored(t, &storagev1.Event{LabelsFromTarget: true}) },
			codec.ErrMalformed, "labels from a target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev engine.Event
			err := codec.UnmarshalEvent(tc.b(t), &ev)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("UnmarshalEvent() = %v, want %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
}

// TestUnmarshalEveryKindRefusesNewer: every decoder refuses unknown
// fields at its top level.
func TestUnmarshalEveryKindRefusesNewer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		b         []byte
		unmarshal func([]byte) error
	}{
		{"Spec", stored(t, withUnknown(&storagev1.Spec{})), func(b []byte) error { return codec.UnmarshalSpec(b, &target.Spec{}) }},
		{"Status", stored(t, withUnknown(&storagev1.Status{})), func(b []byte) error { return codec.UnmarshalStatus(b, &engine.Status{}) }},
		{"Target", stored(t, withUnknown(&storagev1.Target{})), func(b []byte) error { return codec.UnmarshalTarget(b, &engine.Target{}) }},
		{"Event", stored(t, withUnknown(&storagev1.Event{})), func(b []byte) error { return codec.UnmarshalEvent(b, &engine.Event{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.unmarshal(tc.b); !errors.Is(err, codec.ErrNewerFormat) {
				t.Errorf("Unmarshal%s(a value with field 99) = %v, want ErrNewerFormat", tc.name, err)
			}
		})
	}
}

func TestMarshalRefuses(t *testing.T) {
	spec := func(edit func(s *target.Spec)) func() error {
		return func() error {
			s := storetest.WebSpec("web")
			edit(s)
			_, err := codec.MarshalSpec(s)
			return err
		}
	}
	event := func(edit func(ev *engine.Event)) func() error {
		return func() error {
			ev := storetest.Create(storetest.WebSpec("web"), storetest.Epoch).Event
			edit(&ev)
			_, err := codec.MarshalEvent(&ev)
			return err
		}
	}
	for _, tc := range []struct {
		name    string
		marshal func() error
		msg     string
	}{
		{"Scheme", spec(func(s *target.Spec) { s.StartupProbe.Handler.HTTPGet.Scheme = "ftp" }), "spec.startupProbe.httpGet.scheme"},
		{"Phase", event(func(ev *engine.Event) { ev.Target.Status.Phase = 9 }), "event.target.status.phase"},
		{"Result", event(func(ev *engine.Event) { ev.Target.Status.Probes[probe.Liveness].Result = 7 }), "event.target.status.liveness.result"},
		{"Kind", event(func(ev *engine.Event) { ev.Kind = 99 }), "event.kind"},
		{"ProbeType", event(func(ev *engine.Event) { ev.Probe = 5 }), "event.probe"},
		{"From", event(func(ev *engine.Event) { ev.From = 5 }), "event.from"},
		{"TimeAfter2262", event(func(ev *engine.Event) { ev.Time = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC) }), "event.time"},
		{"TimeBefore1678", event(func(ev *engine.Event) { ev.Target.Status.DeleteTime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC) }),
			"event.target.status.deleteTime"},
		{"LastTransitionTime", event(func(ev *engine.Event) {
			ev.Target.Status.Probes[probe.Startup].LastTransitionTime = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
		}), "status.startup.lastTransitionTime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.marshal()
			if !errors.Is(err, codec.ErrUnencodable) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Marshal() = %v, want ErrUnencodable naming %q", err, tc.msg)
			}
		})
	}
}

// TestEventTargetShared: a lifecycle event's target is stored without the
// event's name, revision and labels, and reads back with them (the labels
// map shared, as the engine shares it); where they differ, each is kept
// exactly.
func TestEventTargetShared(t *testing.T) {
	c := storetest.Create(storetest.WebSpec("web"), storetest.Epoch)
	c.SetRevision(7)
	ev := c.Event
	b, err := codec.MarshalEvent(&ev)
	if err != nil {
		t.Fatal(err)
	}
	var m storagev1.Event
	if err := proto.Unmarshal(b[1:], &m); err != nil {
		t.Fatal(err)
	}
	if m.Target.Spec.Name != nil || m.Target.Status.Revision != nil || m.Labels != nil || !m.LabelsFromTarget {
		t.Errorf("stored event target repeats the event: spec name %v, status revision %v, labels %v, labels_from_target %t",
			m.Target.Spec.Name, m.Target.Status.Revision, m.Labels, m.LabelsFromTarget)
	}
	var got engine.Event
	if err := codec.UnmarshalEvent(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(storetest.DurableEvent(ev), got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if reflect.ValueOf(got.Labels).Pointer() != reflect.ValueOf(got.Target.Spec.Labels).Pointer() {
		t.Error("the event's labels and its target's are two maps, want one (as the engine has them)")
	}

	for _, tc := range []struct {
		name string
		edit func(ev *engine.Event)
	}{
		{"EmptySpecName", func(ev *engine.Event) { ev.Target.Spec = &target.Spec{} }},
		{"OtherSpecName", func(ev *engine.Event) { ev.Target.Spec = &target.Spec{Name: "other"} }},
		{"RevisionZero", func(ev *engine.Event) { ev.Target.Status.Revision = 0 }},
		{"OtherRevision", func(ev *engine.Event) { ev.Target.Status.Revision = 3 }},
		{"OtherLabels", func(ev *engine.Event) { ev.Labels = map[string]string{"app": "web"} }},
		{"NoLabels", func(ev *engine.Event) { ev.Labels = nil }},
		{"NoSpec", func(ev *engine.Event) { ev.Target.Spec = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := storetest.DurableEvent(c.Event) // a copy of the target to edit
			ev.Target.Spec = ptr(*ev.Target.Spec)
			ev.Target.Spec.Labels = maps.Clone(ev.Target.Spec.Labels)
			tc.edit(&ev)
			b, err := codec.MarshalEvent(&ev)
			if err != nil {
				t.Fatal(err)
			}
			var got engine.Event
			if err := codec.UnmarshalEvent(b, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(ev, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLabelsKeyTwice: a key given twice keeps its last value, as a
// protobuf map would (Marshal never writes one twice).
func TestLabelsKeyTwice(t *testing.T) {
	b := stored(t, &storagev1.Event{Labels: []*storagev1.Label{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}, {Key: "a", Value: "3"}}})
	var ev engine.Event
	if err := codec.UnmarshalEvent(b, &ev); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": "3", "b": "2"}; !maps.Equal(ev.Labels, want) {
		t.Errorf("Labels = %v, want %v", ev.Labels, want)
	}
}

// TestTimes: the zero time is unset, the Unix epoch is an instant, and an
// instant comes back equal (as local time, without its zone name).
func TestTimes(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    time.Time
	}{
		{"Zero", time.Time{}},
		{"UnixEpoch", time.Unix(0, 0)},
		{"BeforeEpoch", time.Date(1969, 7, 20, 20, 17, 40, 1, time.UTC)},
		{"Zone", time.Date(2026, 3, 1, 12, 0, 0, 999999999, time.FixedZone("X", -7*3600))},
		{"Max", time.Unix(0, 1<<63-1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := engine.Status{CreateTime: tc.t}
			b, err := codec.MarshalStatus(&st)
			if err != nil {
				t.Fatal(err)
			}
			var got engine.Status
			if err := codec.UnmarshalStatus(b, &got); err != nil {
				t.Fatal(err)
			}
			if !got.CreateTime.Equal(tc.t) || got.CreateTime.IsZero() != tc.t.IsZero() {
				t.Errorf("CreateTime %v came back as %v", tc.t, got.CreateTime)
			}
		})
	}
}

// TestDeterministic: equal values have equal bytes (maps in key order),
// whatever the order the maps were built in.
func TestDeterministic(t *testing.T) {
	a, b := storetest.WebSpec("web"), storetest.WebSpec("web")
	a.Labels, b.Labels = map[string]string{}, map[string]string{}
	for i := range 50 {
		a.Labels[string(rune('a'+i%26))+strings.Repeat("x", i)] = "v"
		b.Labels[string(rune('a'+(49-i)%26))+strings.Repeat("x", 49-i)] = "v"
	}
	ba, err := codec.MarshalSpec(a)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		bb, err := codec.MarshalSpec(b)
		if err != nil {
			t.Fatal(err)
		}
		if string(ba) != string(bb) {
			t.Fatal("two equal specs have different stored bytes")
		}
	}
}
