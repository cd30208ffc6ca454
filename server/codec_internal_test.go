package server

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestMarshalCodecEncodesWhatProtobufDecodes: every probe.v1 message, with
// every field set (each choice of each oneof in turn, maps and lists of
// two), encoded by marshalCodec, decodes with protobuf-go into an equal
// message. A field the generated code missed or spelled differently fails
// here. Messages below and above grpc-go's pooling threshold both pass.
func TestMarshalCodecEncodesWhatProtobufDecodes(t *testing.T) {
	c := marshalCodec{encoding.GetCodecV2(protocodec.Name)}
	fd := probev1.File_probe_v1_probe_proto
	msgs := fd.Messages()
	tested := 0
	for i := range msgs.Len() {
		md := msgs.Get(i)
		for choice := range maxOneofChoices(md) {
			mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
			if err != nil {
				t.Fatal(err)
			}
			want := mt.New()
			populate(want, choice, 0)
			t.Run(fmt.Sprintf("%s/%d", md.Name(), choice), func(t *testing.T) {
				if _, ok := want.Interface().(generatedMarshal); !ok {
					t.Fatalf("%s has no generated marshalling code (make generate)", md.FullName())
				}
				data, err := c.Marshal(want.Interface())
				if err != nil {
					t.Fatal(err)
				}
				got := mt.New().Interface()
				if err := proto.Unmarshal(data.Materialize(), got); err != nil {
					t.Fatalf("protobuf-go cannot decode it: %v", err)
				}
				if !proto.Equal(got, want.Interface()) {
					t.Errorf("decoded\n%v\nwant\n%v", got, want.Interface())
				}
				data.Free()
			})
			tested++
		}
	}
	if tested < msgs.Len() {
		t.Fatalf("%d messages tested of %d", tested, msgs.Len())
	}

	t.Run("a page above the pooling threshold", func(t *testing.T) {
		page := &probev1.ListTargetsResponse{NextPageToken: "next"}
		for i := range 100 {
			target := &probev1.Target{}
			populate(target.ProtoReflect(), i, 0)
			page.Targets = append(page.Targets, target)
		}
		data, err := c.Marshal(page)
		if err != nil {
			t.Fatal(err)
		}
		defer data.Free()
		if data.Len() != proto.Size(page) {
			t.Fatalf("%d bytes, protobuf-go sizes it %d", data.Len(), proto.Size(page))
		}
		got := &probev1.ListTargetsResponse{}
		if err := proto.Unmarshal(data.Materialize(), got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, page) {
			t.Error("the page decodes into a different message")
		}
	})
	t.Run("a message without generated code", func(t *testing.T) {
		m := dynamicpb.NewMessage((&probev1.Target{}).ProtoReflect().Descriptor())
		m.Set(m.Descriptor().Fields().ByName("name"), protoreflect.ValueOfString("dynamic"))
		data, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got := &probev1.Target{}
		if err := proto.Unmarshal(data.Materialize(), got); err != nil || got.GetName() != "dynamic" {
			t.Fatalf("got %v, %v", got, err)
		}
	})
}

// maxOneofChoices is the number of fields of md's largest oneof (1 when it
// has none): populate is called once per choice.
func maxOneofChoices(md protoreflect.MessageDescriptor) int {
	n := 1
	for i := range md.Oneofs().Len() {
		n = max(n, md.Oneofs().Get(i).Fields().Len())
	}
	return n
}

// populate sets every field of m to a value other than its default: in
// each oneof, the field numbered choice (modulo its size); nested messages
// down to a depth of 4.
func populate(m protoreflect.Message, choice, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() && o.Fields().Get(choice%o.Fields().Len()) != fd {
			continue
		}
		switch {
		case fd.IsMap():
			if depth >= 4 && fd.MapValue().Kind() == protoreflect.MessageKind {
				continue
			}
			mp := m.Mutable(fd).Map()
			for k := range 2 {
				key := scalar(fd.MapKey(), k+1).MapKey()
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					v := mp.NewValue()
					populate(v.Message(), choice, depth+1)
					mp.Set(key, v)
				} else {
					mp.Set(key, scalar(fd.MapValue(), k+1))
				}
			}
		case fd.IsList():
			if depth >= 4 && fd.Kind() == protoreflect.MessageKind {
				continue
			}
			l := m.Mutable(fd).List()
			for k := range 2 {
				if fd.Kind() == protoreflect.MessageKind {
					v := l.NewElement()
					populate(v.Message(), choice, depth+1)
					l.Append(v)
				} else {
					l.Append(scalar(fd, k+1))
				}
			}
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			if depth >= 4 {
				continue
			}
			populate(m.Mutable(fd).Message(), choice, depth+1)
		default:
			m.Set(fd, scalar(fd, choice+1))
		}
	}
}

// scalar is a non-default value of fd's kind, varied by k (≥ 1).
func scalar(fd protoreflect.FieldDescriptor, k int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(1 + k%(vals.Len()-1)).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(-1000 * k))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(-1 << 40 * k))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(1000 * k))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(1 << 40 * k))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(k) + 0.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(k) + 0.25)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s-%d-é", fd.Name(), k))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{0, byte(k), 0xff})
	}
	panic(fmt.Sprintf("populate: no value for %s of kind %s", fd.FullName(), fd.Kind()))
}
