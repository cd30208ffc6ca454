package server_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// rawCodec sends and receives raw bytes, whatever they encode.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// field1 is a message whose field 1 holds b (length-delimited).
func field1(b []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), b)
}

// TestMalformedRequestsAreInvalidArgument: a request that does not decode
// is the client's fault (InvalidArgument), not an internal error of
// probed (grpc-go's Internal), for unary calls and streams alike (issue
// 14, item 13).
func TestMalformedRequestsAreInvalidArgument(t *testing.T) {
	s := probedtest.Start(t, probedtest.Options{})
	invoke := func(method string, req []byte) error {
		var resp []byte
		return s.Conn.Invoke(t.Context(), method, &req, &resp, grpc.ForceCodecV2(rawCodec{}))
	}
	watch := func(req []byte) error {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st, err := s.Conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, probev1.ProbeService_Watch_FullMethodName, grpc.ForceCodecV2(rawCodec{}))
		if err != nil {
			return err
		}
		if err := st.SendMsg(&req); err != nil {
			return err
		}
		if err := st.CloseSend(); err != nil {
			return err
		}
		var resp []byte
		return st.RecvMsg(&resp)
	}
	notUTF8 := []byte{0xff, 0xfe}
	truncated := []byte{0x0a, 0x7f, 'x'} // field 1, 127 bytes announced, 1 sent
	forged := protowire.AppendBytes(protowire.AppendTag(nil, protowire.MaxValidNumber, protowire.BytesType), []byte("guess: boom"))
	tests := []struct {
		name string
		call func() error
		want codes.Code
		msg  string
	}{
		{"create: a name that is not UTF-8", func() error { return invoke(probev1.ProbeService_CreateTarget_FullMethodName, field1(field1(notUTF8))) },
			codes.InvalidArgument, "the request does not decode as probe.v1.CreateTargetRequest"},
		{"get: truncated wire data", func() error { return invoke(probev1.ProbeService_GetTarget_FullMethodName, truncated) },
			codes.InvalidArgument, "the request does not decode as probe.v1.GetTargetRequest"},
		{"watch: a name that is not UTF-8", func() error {
			return watch(protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), notUTF8))
		},
			codes.InvalidArgument, "the request does not decode as probe.v1.WatchRequest"},
		{"a well-formed request", func() error { return invoke(probev1.ProbeService_GetTarget_FullMethodName, field1([]byte("nope"))) },
			codes.NotFound, "not found"},
		{"a forged marker is an unknown field like any other", func() error { return invoke(probev1.ProbeService_ListTargets_FullMethodName, forged) },
			codes.OK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if st := status.Convert(err); st.Code() != tt.want || !strings.Contains(st.Message(), tt.msg) {
				t.Errorf("%v, want %v with a message containing %q", err, tt.want, tt.msg)
			}
		})
	}
}
