package server

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// generatedMarshal is a message with generated marshalling code: every
// probe.v1 message (vtprotobuf, buf.gen.vtproto.yaml).
type generatedMarshal interface {
	SizeVT() int
	MarshalToSizedBufferVT(b []byte) (int, error)
}

// marshalCodec is grpc-go's proto codec, except that it encodes a message
// with generated marshalling code by that code, without protobuf-go's
// reflection: the encoding of a ListTargets page was most of its CPU
// (docs/decisions.md, issue 34, "vtprotobuf"). The bytes are the same
// wire format; decoding stays protobuf-go's, which validates UTF-8 (the
// generated decoder does not).
type marshalCodec struct {
	encoding.CodecV2
}

// Marshal encodes v into a buffer of exactly its size, from grpc-go's
// pool when it is large enough to be worth pooling, as grpc-go's codec
// does.
func (c marshalCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(generatedMarshal)
	if !ok {
		return c.CodecV2.Marshal(v)
	}
	size := m.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		b := make([]byte, size)
		if _, err := m.MarshalToSizedBufferVT(b); err != nil {
			return nil, fmt.Errorf("proto: marshal %T: %w", v, err)
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	pool := mem.DefaultBufferPool()
	b := pool.Get(size)
	if _, err := m.MarshalToSizedBufferVT((*b)[:size]); err != nil {
		pool.Put(b)
		return nil, fmt.Errorf("proto: marshal %T: %w", v, err)
	}
	return mem.BufferSlice{mem.NewBuffer(b, pool)}, nil
}
