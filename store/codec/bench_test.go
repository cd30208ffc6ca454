package codec_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/codec"
	"github.com/probed/probed/store/storetest"
)

// benchValue is one value as the store keeps it, with both encodings.
type benchValue struct {
	name  string
	value any
}

func benchValues() []benchValue {
	web := storetest.Create(storetest.WebSpec("target-000123"), storetest.Epoch)
	web.SetRevision(123456)
	web.Target.Status.Client = "alice"
	tr := storetest.Transition(web.Target, probe.Readiness, probe.Success, 2, storetest.Epoch.Add(1e9))
	tr.SetRevision(123457)
	tcp := storetest.Create(storetest.TCPSpec("target-000124"), storetest.Epoch)
	tcp.SetRevision(123458)
	return []benchValue{
		{"spec=web", web.Target.Spec},
		{"spec=tcp", tcp.Target.Spec},
		{"status=web", &tr.Target.Status},
		{"status=tcp", &tcp.Target.Status},
		{"event=transition", &tr.Event},
		{"event=created-web", &web.Event},
		{"event=created-tcp", &tcp.Event},
	}
}

// BenchmarkFormat encodes and decodes one value of each kind with
// encoding/json (the schema 1 format: the engine's types and their json
// tags) and with the codec, side by side, and reports the stored size.
//
//	go test -run '^$' -bench Format -count 6 ./store/codec
func BenchmarkFormat(b *testing.B) {
	for _, v := range benchValues() {
		for _, f := range []struct {
			name      string
			marshal   func(any) ([]byte, error)
			unmarshal func([]byte, any) (any, error)
		}{
			{"json", json.Marshal, func(data []byte, like any) (any, error) {
				p := newLike(like)
				return p, json.Unmarshal(data, p)
			}},
			{"codec", marshalAny, unmarshalLike},
		} {
			data, err := f.marshal(v.value)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%s/format=%s/op=marshal", v.name, f.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := f.marshal(v.value); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(data)), "stored-B")
			})
			b.Run(fmt.Sprintf("%s/format=%s/op=unmarshal", v.name, f.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := f.unmarshal(data, v.value); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(data)), "stored-B")
			})
		}
	}
}

// newLike returns a pointer to a new zero value of like's type.
func newLike(like any) any {
	switch like.(type) {
	case *target.Spec:
		return &target.Spec{}
	case *engine.Status:
		return &engine.Status{}
	case *engine.Event:
		return &engine.Event{}
	}
	panic(fmt.Sprintf("no value for %T", like))
}

// TestTimeEncodingSize backs the choice of sfixed64 Unix nanoseconds over
// google.protobuf.Timestamp (see storage.proto): a time of today's costs 9
// bytes with its tag, a Timestamp 13 or 14.
func TestTimeEncodingSize(t *testing.T) {
	st := engine.Status{CreateTime: storetest.Epoch}
	b, err := codec.MarshalStatus(&st)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(b) - 1; got != 9 {
		t.Errorf("a status with only a create time is %d bytes, want 9 (tag + 8)", got)
	}
}
