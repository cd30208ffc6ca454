package codec_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/codec"
)

// liveFields are the fields of the engine's types that are not stored, by
// "type.Field", with the reason. Everything else must survive
// Marshal/Unmarshal.
var liveFields = map[string]string{
	"engine.ProbeStatus.Effective":            "computed from the spec",
	"engine.ProbeStatus.ConsecutiveSuccesses": "live run counter: one write per probe otherwise",
	"engine.ProbeStatus.ConsecutiveFailures":  "live run counter: one write per probe otherwise",
	"engine.ProbeStatus.LastProbeTime":        "live figure of the last run",
	"engine.ProbeStatus.LastMessage":          "live figure of the last run",
	"engine.ProbeStatus.LastLatency":          "live figure of the last run",
	"engine.ProbeStatus.ProbesTotal":          "live counter since the engine started",
	"engine.ProbeStatus.Recent":               "live figures of the last runs",
}

const howToFix = `A field of an engine type that the store must keep needs a field in
proto/probed/storage/v1/storage.proto (then make generate), a line in each
direction in store/codec, and new golden files (go test ./store/codec -update,
check the .txt diff). A field that must not survive a restart goes into
liveFields in store/codec/complete_test.go, with the reason.`

// root is a value the codec stores, with its round trip.
type root struct {
	name      string
	typ       reflect.Type
	roundTrip func(v any) (any, error)
}

var roots = []root{
	{"target.Spec", reflect.TypeFor[target.Spec](), func(v any) (any, error) {
		b, err := codec.MarshalSpec(v.(*target.Spec))
		if err != nil {
			return nil, err
		}
		var got target.Spec
		return &got, codec.UnmarshalSpec(b, &got)
	}},
	{"engine.Status", reflect.TypeFor[engine.Status](), func(v any) (any, error) {
		b, err := codec.MarshalStatus(v.(*engine.Status))
		if err != nil {
			return nil, err
		}
		var got engine.Status
		return &got, codec.UnmarshalStatus(b, &got)
	}},
	{"engine.Target", reflect.TypeFor[engine.Target](), func(v any) (any, error) {
		b, err := codec.MarshalTarget(v.(*engine.Target))
		if err != nil {
			return nil, err
		}
		var got engine.Target
		return &got, codec.UnmarshalTarget(b, &got)
	}},
	{"engine.Event", reflect.TypeFor[engine.Event](), func(v any) (any, error) {
		b, err := codec.MarshalEvent(v.(*engine.Event))
		if err != nil {
			return nil, err
		}
		var got engine.Event
		return &got, codec.UnmarshalEvent(b, &got)
	}},
}

// TestEveryFieldIsStored fills every exported field of each stored type
// (recursively: specs, probes, handlers, statuses, an event's target) with
// a non-zero value and checks that Unmarshal returns it, except the live
// fields, which must come back zero.
func TestEveryFieldIsStored(t *testing.T) {
	for _, r := range roots {
		t.Run(r.name, func(t *testing.T) {
			f := &filler{t: t}
			v := reflect.New(r.typ)
			f.fill(v.Elem(), r.name)
			want := reflect.New(r.typ)
			want.Elem().Set(deepCopy(v.Elem()))
			zeroLive(want.Elem())
			got, err := r.roundTrip(v.Interface())
			if err != nil {
				t.Fatalf("round trip of a fully filled %s: %v\n%s", r.name, err, howToFix)
			}
			if diff := cmp.Diff(want.Interface(), got); diff != "" {
				t.Errorf("a fully filled %s does not survive the round trip (-want +got):\n%s\n%s", r.name, diff, howToFix)
			}
		})
	}
}

// TestEachFieldAlone sets one field at a time (allocating the pointers on
// its way), so that a failure names the field. A pointer is also set to
// its element's zero value (a set 0 is not an unset field), a pointer to a
// struct to an empty one.
func TestEachFieldAlone(t *testing.T) {
	for _, r := range roots {
		t.Run(r.name, func(t *testing.T) {
			for _, p := range leafPaths(r.typ, nil) {
				name := r.name + p.String()
				v := reflect.New(r.typ)
				fv := p.walk(v.Elem())
				if fv.Kind() == reflect.Pointer {
					fv.Set(reflect.New(fv.Type().Elem())) // set, to zero
					checkAlone(t, r, p, name+" (set to zero)", v)
					if fv.Type().Elem().Kind() == reflect.Struct {
						continue // its fields have paths of their own
					}
				}
				f := &filler{t: t}
				f.fill(fv, name)
				checkAlone(t, r, p, name, v)
			}
		})
	}
}

// checkAlone checks the round trip of v, in which the field at p is set.
func checkAlone(t *testing.T, r root, p path, name string, v reflect.Value) {
	t.Helper()
	want := reflect.New(r.typ)
	want.Elem().Set(deepCopy(v.Elem()))
	zeroLive(want.Elem())
	got, err := r.roundTrip(v.Interface())
	if err != nil {
		t.Errorf("%s set alone: %v\n%s", name, err, howToFix)
		return
	}
	if diff := cmp.Diff(want.Interface(), got); diff != "" {
		what := "is not stored"
		if p.live() {
			what = "is live and must not be stored"
		}
		t.Errorf("%s %s (-want +got):\n%s\n%s", name, what, diff, howToFix)
	}
}

// A path is the way from a root to one field: struct field indexes, and
// -1 for "the element" of a pointer, slice (its first) or array index i
// as -2-i.
type path []step

type step struct {
	index int
	owner reflect.Type // the struct type, for a field
}

func (p path) String() string {
	var b strings.Builder
	for _, s := range p {
		switch {
		case s.owner != nil:
			b.WriteString("." + s.owner.Field(s.index).Name)
		case s.index == -1:
		default:
			fmt.Fprintf(&b, "[%d]", -2-s.index)
		}
	}
	return b.String()
}

// live reports whether the path goes through a live field.
func (p path) live() bool {
	for _, s := range p {
		if s.owner != nil {
			if _, ok := liveFields[s.owner.String()+"."+s.owner.Field(s.index).Name]; ok {
				return true
			}
		}
	}
	return false
}

// walk returns the field p names in v, allocating pointers and slices on
// the way.
func (p path) walk(v reflect.Value) reflect.Value {
	for _, s := range p {
		switch {
		case s.owner != nil:
			v = v.Field(s.index)
		case v.Kind() == reflect.Pointer:
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		case v.Kind() == reflect.Slice:
			if v.Len() == 0 {
				v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			}
			v = v.Index(0)
		default: // array
			v = v.Index(-2 - s.index)
		}
	}
	return v
}

// leafPaths lists the paths to every field of t that is not a struct to
// descend into (scalars, times, maps, slices of scalars), and to every
// pointer to a struct by itself (a set but empty pointer is a value too).
func leafPaths(t reflect.Type, prefix path) []path {
	leaf := func() []path { return []path{append(path(nil), prefix...)} }
	if _, ok := special[t]; ok {
		return leaf()
	}
	switch t.Kind() {
	case reflect.Pointer:
		if t.Elem().Kind() != reflect.Struct {
			return leaf()
		}
		return append(leaf(), leafPaths(t.Elem(), append(prefix, step{index: -1}))...)
	case reflect.Slice:
		if t.Elem().Kind() != reflect.Struct {
			return leaf()
		}
		return leafPaths(t.Elem(), append(prefix, step{index: -1}))
	case reflect.Array:
		var out []path
		for i := range t.Len() {
			out = append(out, leafPaths(t.Elem(), append(prefix, step{index: -2 - i}))...)
		}
		return out
	case reflect.Struct:
		var out []path
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				out = append(out, leafPaths(t.Field(i).Type, append(prefix, step{index: i, owner: t}))...)
			}
		}
		return out
	default:
		return leaf()
	}
}

// special are the types whose zero value is not the only one the codec
// must not be given: enums (values the engine defines), times (within
// what Unix nanoseconds hold).
var special = map[reflect.Type]func(f *filler) any{
	reflect.TypeFor[time.Time](): func(f *filler) any {
		return time.Date(2026, 3, 1, 12, 0, f.next(), f.next()*1000+7, time.UTC)
	},
	reflect.TypeFor[time.Duration](): func(f *filler) any { return time.Duration(f.next())*time.Millisecond + 3 },
	reflect.TypeFor[engine.Phase]():  func(*filler) any { return engine.Terminating },
	reflect.TypeFor[engine.EventKind](): func(*filler) any {
		return engine.KindUpdated
	},
	reflect.TypeFor[probe.Type]():   func(*filler) any { return probe.Readiness },
	reflect.TypeFor[probe.Result](): func(*filler) any { return probe.Failure },
	reflect.TypeFor[probe.Scheme](): func(*filler) any { return probe.SchemeHTTPS },
}

// filler sets values to distinct non-zero values.
type filler struct {
	t *testing.T
	n int
}

func (f *filler) next() int { f.n++; return f.n }

// fill sets v, and everything it holds, to non-zero values; name is its
// path for errors.
func (f *filler) fill(v reflect.Value, name string) {
	if mk, ok := special[v.Type()]; ok {
		v.Set(reflect.ValueOf(mk(f)).Convert(v.Type()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		// Not UTF-8: strings are stored as the engine holds them.
		v.SetString(fmt.Sprintf("s%d\xff\xfe", f.next()))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f.next()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.next()))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem(), name)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			f.fill(v.Index(i), fmt.Sprintf("%s[%d]", name, i))
		}
	case reflect.Array:
		for i := range v.Len() {
			f.fill(v.Index(i), fmt.Sprintf("%s[%d]", name, i))
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			f.fill(k, name+" key")
			f.fill(e, name+" value")
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			fd := v.Type().Field(i)
			if !fd.IsExported() {
				f.t.Fatalf("%s: unexported field %s of %s: the codec test cannot fill it; give it a case in special", name, fd.Name, v.Type())
			}
			f.fill(v.Field(i), name+"."+fd.Name)
		}
	default:
		f.t.Fatalf("%s: a %s cannot be filled; give %s a case in special", name, v.Kind(), v.Type())
	}
}

// deepCopy returns a copy of v that shares no pointer, slice or map with it.
func deepCopy(v reflect.Value) reflect.Value {
	if _, ok := special[v.Type()]; ok {
		return v
	}
	out := reflect.New(v.Type()).Elem()
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			out.Set(reflect.New(v.Type().Elem()))
			out.Elem().Set(deepCopy(v.Elem()))
		}
	case reflect.Slice:
		if !v.IsNil() {
			out.Set(reflect.MakeSlice(v.Type(), v.Len(), v.Len()))
			for i := range v.Len() {
				out.Index(i).Set(deepCopy(v.Index(i)))
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			out.Index(i).Set(deepCopy(v.Index(i)))
		}
	case reflect.Map:
		if !v.IsNil() {
			out.Set(reflect.MakeMap(v.Type()))
			for it := v.MapRange(); it.Next(); {
				out.SetMapIndex(it.Key(), deepCopy(it.Value()))
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			out.Field(i).Set(deepCopy(v.Field(i)))
		}
	default:
		out.Set(v)
	}
	return out
}

// zeroLive zeroes the live fields everywhere in v.
func zeroLive(v reflect.Value) {
	if _, ok := special[v.Type()]; ok {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			zeroLive(v.Elem())
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			zeroLive(v.Index(i))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if _, ok := liveFields[v.Type().String()+"."+v.Type().Field(i).Name]; ok {
				v.Field(i).SetZero()
				continue
			}
			zeroLive(v.Field(i))
		}
	}
}
