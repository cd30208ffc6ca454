package server

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestFitsOneResponseBoundsTheSize: the bound fitsOneResponse takes
// without encoding is never below an event's encoded size, for the
// largest probe events validation allows, so a batch it lets through
// whole fits in one Watch message; a batch with a target is sized
// exactly, and one over the limit is split.
func TestFitsOneResponseBoundsTheSize(t *testing.T) {
	t.Parallel()
	largest := &probev1.Event{
		Revision: ^uint64(0), Time: timestamppb.Now(), Name: strings.Repeat("n", target.MaxNameBytes),
		Kind: probev1.EventKind_EVENT_KIND_TRANSITION, ProbeType: probev1.ProbeType_PROBE_TYPE_READINESS,
		From: probev1.Result_RESULT_FAILURE, To: probev1.Result_RESULT_SUCCESS, Consecutive: -1,
		Latency: durationpb.New(-1 << 62), Message: strings.Repeat("\uFFFD", probe.MaxMessageBytes/3),
		Reason: longestReason, Started: true, Ready: true, Live: true,
	}
	tests := []struct {
		name   string
		events []*probev1.Event
		want   bool
	}{
		{name: "one small event", events: []*probev1.Event{{Revision: 1, Name: "a", Message: "ok"}}, want: true},
		{name: "a hundred of the largest probe events", events: repeat(largest, 100), want: true},
		{name: "more of them than fit", events: repeat(largest, MaxResponseBytes/proto.Size(largest)+1), want: false},
		{name: "an event with a target", events: []*probev1.Event{{Revision: 1, Target: &probev1.Target{Name: "a"}}}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := fitsOneResponse(tt.events); got != tt.want {
				t.Errorf("fitsOneResponse() = %v; want %v", got, tt.want)
			}
			if tt.want {
				if n := proto.Size(&probev1.WatchResponse{Events: tt.events, Revision: ^uint64(0)}); n > MaxResponseBytes {
					t.Errorf("let through %d bytes in one message; want at most %d", n, MaxResponseBytes)
				}
			}
		})
	}
}

// longestReason is a reason as long as the engine's longest.
const longestReason = "Terminating"

func repeat(ev *probev1.Event, n int) []*probev1.Event {
	out := make([]*probev1.Event, n)
	for i := range out {
		out[i] = ev
	}
	return out
}

// TestSizeBoundIsAnUpperBound: sizeBound is never below a Target's
// encoded size. Every field of the target is filled, recursively, through
// protobuf reflection (so that a field added to the API is filled too):
// numbers at their largest encodings, every message present, maps and
// repeated fields with three entries, strings empty (what the fixed part
// bounds) or long (what the lengths bound: one string sizeBound missed
// would exceed the fixed part's slack), each handler of the probes' oneof
// in turn.
func TestSizeBoundIsAnUpperBound(t *testing.T) {
	t.Parallel()
	for _, strLen := range []int{0, 8 << 10} {
		for choice := range 4 {
			t.Run(fmt.Sprintf("strings of %d bytes, handler %d", strLen, choice), func(t *testing.T) {
				t.Parallel()
				tg := &probev1.Target{}
				fillMessage(tg.ProtoReflect(), strLen, choice)
				if got, size := sizeBound(tg), proto.Size(tg); got < size {
					t.Errorf("sizeBound() = %d, below the encoded size %d", got, size)
				}
			})
		}
	}
}

// TestFitPageCutsByBytes: a page of targets whose bound exceeds a
// response is sized exactly and cut where the bytes run out (at least one
// target); a page that fits whole is not cut.
func TestFitPageCutsByBytes(t *testing.T) {
	t.Parallel()
	small := &probev1.Target{Name: "a"}
	big := &probev1.Target{Name: "b", Labels: map[string]string{"ca": strings.Repeat("x", 1<<20)}}
	tests := []struct {
		name    string
		targets []*probev1.Target
		want    int
	}{
		{"small targets", []*probev1.Target{small, small, small}, 3},
		{"two of 1 MiB, then small ones", []*probev1.Target{big, big, small, small}, 4},
		{"four of 1 MiB", []*probev1.Target{big, big, big, big}, 2},
		{"one larger than a response", []*probev1.Target{{Name: "c", Labels: map[string]string{"x": strings.Repeat("x", MaxResponseBytes)}}, small}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := fitPage(tt.targets); got != tt.want {
				t.Errorf("fitPage() = %d, want %d", got, tt.want)
			}
		})
	}
}

// fillMessage sets every field of m: see TestSizeBoundIsAnUpperBound. Of
// each oneof it sets the field at index choice (modulo its size).
func fillMessage(m protoreflect.Message, strLen, choice int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() && o.Fields().Get(choice%o.Fields().Len()) != fd {
			continue
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for j := range 3 {
				key := fillScalar(fd.MapKey(), strLen, j).MapKey()
				if fd.MapValue().Message() != nil {
					v := mp.NewValue()
					fillMessage(v.Message(), strLen, choice)
					mp.Set(key, v)
				} else {
					mp.Set(key, fillScalar(fd.MapValue(), strLen, j))
				}
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for j := range 3 {
				if fd.Message() != nil {
					v := l.NewElement()
					fillMessage(v.Message(), strLen, choice)
					l.Append(v)
				} else {
					l.Append(fillScalar(fd, strLen, j))
				}
			}
		case fd.Message() != nil:
			fillMessage(m.Mutable(fd).Message(), strLen, choice)
		default:
			m.Set(fd, fillScalar(fd, strLen, 0))
		}
	}
}

// fillScalar is the largest encoding of a value of fd's kind; strings of
// strLen bytes (made distinct by i, for map keys).
func fillScalar(fd protoreflect.FieldDescriptor, strLen, i int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprint(i) + strings.Repeat("x", strLen))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(fmt.Sprint(i) + strings.Repeat("x", strLen)))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(vals.Len() - 1).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(math.MinInt32)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(math.MinInt64)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(math.MaxUint32)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(math.MaxUint64)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(math.MaxFloat32)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(math.MaxFloat64)
	default:
		panic(fmt.Sprintf("fillScalar: kind %v", fd.Kind()))
	}
}
