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
// every field set (fillMessage: each choice of each oneof in turn),
// encoded by marshalCodec, decodes with protobuf-go into an equal
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
			fillMessage(want, 8, choice)
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
			fillMessage(target.ProtoReflect(), 8, i)
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
// has none): the message is filled once per choice.
func maxOneofChoices(md protoreflect.MessageDescriptor) int {
	n := 1
	for i := range md.Oneofs().Len() {
		n = max(n, md.Oneofs().Get(i).Fields().Len())
	}
	return n
}
