package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"runtime"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/probed/probed/engine/probe"
)

// GRPCOptions are the server options the service needs besides its
// registration: a request that does not decode (malformed wire data, a
// string that is not UTF-8) is InvalidArgument, the client's fault, where
// grpc-go reports Internal; responses are encoded by generated code
// (marshalCodec). Pass them after the authentication
// interceptors, so that a caller without credentials is refused as such
// first. They apply to every service of the server.
//
// Calls run on StreamWorkers() goroutines that grpc-go keeps (a call
// finding them all busy gets a goroutine of its own): a new goroutine per
// call grew its stack through the interceptors, the handler and the
// encoding, copying it several times, a sixth of a GetTarget's CPU.
func GRPCOptions() []grpc.ServerOption {
	d := newDecodeCheck()
	return []grpc.ServerOption{
		grpc.NumStreamWorkers(StreamWorkers()),
		grpc.ForceServerCodecV2(d),
		grpc.ChainUnaryInterceptor(d.unary),
		grpc.ChainStreamInterceptor(d.stream),
	}
}

// StreamWorkers is the number of goroutines GRPCOptions keeps to run
// calls: 4 per CPU (GOMAXPROCS), as the engine keeps idle probe workers.
func StreamWorkers() uint32 { return uint32(4 * runtime.GOMAXPROCS(0)) }

// markerField is the field number (the largest protobuf allows) of the
// unknown field that marks a request that did not decode.
const markerField protowire.Number = protowire.MaxValidNumber

// decodeCheck is marshalCodec, except that a request that does not
// decode becomes an empty message marked with the error (an unknown field
// holding a per-process random nonce, which no client can forge, and the
// error), and the interceptors answer a marked request with
// InvalidArgument before any handler sees it. grpc-go wraps every codec
// error in Internal, hence the detour.
type decodeCheck struct {
	encoding.CodecV2
	nonce []byte
}

func newDecodeCheck() *decodeCheck {
	return &decodeCheck{CodecV2: marshalCodec{encoding.GetCodecV2(protocodec.Name)}, nonce: []byte(rand.Text())}
}

// Name is the proto codec's: clients see no difference.
func (d *decodeCheck) Name() string { return protocodec.Name }

// Unmarshal decodes data into v; when it cannot, v is left empty and
// marked, and the error is reported by the interceptors.
func (d *decodeCheck) Unmarshal(data mem.BufferSlice, v any) error {
	err := d.CodecV2.Unmarshal(data, v)
	m, ok := v.(proto.Message)
	if err == nil || !ok {
		return err
	}
	proto.Reset(m)
	mark := append(d.nonce[:len(d.nonce):len(d.nonce)], probe.Bound(err.Error(), 512)...)
	m.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, markerField, protowire.BytesType), mark))
	return nil
}

// malformed returns the decoding error v is marked with, or nil.
func (d *decodeCheck) malformed(v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return nil
	}
	u := m.ProtoReflect().GetUnknown()
	num, typ, n := protowire.ConsumeTag(u)
	if n < 0 || num != markerField || typ != protowire.BytesType {
		return nil
	}
	mark, k := protowire.ConsumeBytes(u[n:])
	if k < 0 || n+k != len(u) || !bytes.HasPrefix(mark, d.nonce) {
		return nil
	}
	return status.Errorf(codes.InvalidArgument, "the request does not decode as %s: %s",
		m.ProtoReflect().Descriptor().FullName(), mark[len(d.nonce):])
}

func (d *decodeCheck) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := d.malformed(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (d *decodeCheck) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &decodeCheckStream{ServerStream: ss, d: d})
}

// decodeCheckStream answers a marked message with InvalidArgument.
type decodeCheckStream struct {
	grpc.ServerStream
	d *decodeCheck
}

func (s *decodeCheckStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.d.malformed(m)
}
