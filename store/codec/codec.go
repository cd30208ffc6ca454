// Package codec is the stored form of the engine's values: targets (spec
// and durable status), statuses and events, as the stores keep them (bbolt
// today, etcd in cluster mode). The engine's types carry no format; this
// package maps them to the protobuf messages of
// proto/probed/storage/v1/storage.proto, which are private to the stores.
//
// A stored value is one version byte (Version) followed by the message.
// The format is pinned by the golden files in testdata (a change of the
// bytes must be deliberate: go test ./store/codec -update), and a test
// fills every exported field of the engine's types so that a field added
// to a domain type without a place in the format fails.
//
// What Unmarshal returns is what Marshal was given, with these exceptions,
// none of which the engine can tell apart:
//   - the live fields of engine.ProbeStatus (counts, last probe time,
//     message and latency, effective timing, recent runs) are not stored
//     and come back zero;
//   - times come back as the same instant in the local zone, without a
//     monotonic reading (time.Unix);
//   - an empty map or slice comes back nil.
//
// An Event's Target is stored without what the event already says: its
// spec's name, its status's revision and its labels read back from the
// event when they were the same (the labels map is then shared, as the
// engine shares it).
//
// Unmarshal refuses a value with a version, field or enum value it does not
// know (ErrNewerFormat: a newer probed wrote it, and dropping what this
// build does not understand would lose data), and bytes that are not a
// value of this format (ErrMalformed). Marshal refuses what the format
// cannot hold (ErrUnencodable): an enum value the engine does not define,
// a time outside the years 1678–2262.
package codec

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Version is the format version, the first byte of every value Marshal
// returns. Adding a field does not change it (see the package doc); an
// incompatible format would be 2.
const Version = 1

// maxVersion bounds the first bytes read as the version of a newer format;
// a greater one (a JSON '{' is 0x7b) is not a stored value at all.
const maxVersion = 15

// Sentinel errors; check with errors.Is.
var (
	// ErrMalformed: the bytes are not a value of this format (damaged, or
	// not written by probed).
	ErrMalformed = errors.New("malformed stored value")
	// ErrNewerFormat: the value was written by a newer probed (a version,
	// field or enum value this build does not know).
	ErrNewerFormat = errors.New("stored value written by a newer probed")
	// ErrUnencodable: the value holds something the format cannot store.
	ErrUnencodable = errors.New("value cannot be stored")
)

// marshal returns the version byte followed by m. Map entries are written
// in key order, so equal values have equal bytes.
func marshal(m proto.Message) ([]byte, error) {
	opts := proto.MarshalOptions{Deterministic: true}
	b := make([]byte, 1, 1+opts.Size(m))
	b[0] = Version
	opts.UseCachedSize = true // the sizes Size just computed
	return opts.MarshalAppend(b, m)
}

// unmarshal checks the version byte of b and decodes the rest into m.
func unmarshal(b []byte, m proto.Message) error {
	switch {
	case len(b) == 0:
		return fmt.Errorf("%w: empty", ErrMalformed)
	case b[0] > Version && b[0] <= maxVersion:
		return fmt.Errorf("%w: format version %d, this probed knows up to %d", ErrNewerFormat, b[0], Version)
	case b[0] != Version:
		return fmt.Errorf("%w: first byte %#02x is no format version", ErrMalformed, b[0])
	}
	if err := proto.Unmarshal(b[1:], m); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

// known fails with ErrNewerFormat when m holds fields this build does not
// know; what names the message in the error.
func known(m proto.Message, what string) error {
	u := m.ProtoReflect().GetUnknown()
	if len(u) == 0 {
		return nil
	}
	var nums []string
	for len(u) > 0 {
		num, typ, n := protowire.ConsumeTag(u)
		if n < 0 {
			return fmt.Errorf("%s: %w: %w", what, ErrMalformed, protowire.ParseError(n))
		}
		vn := protowire.ConsumeFieldValue(num, typ, u[n:])
		if vn < 0 {
			return fmt.Errorf("%s: %w: %w", what, ErrMalformed, protowire.ParseError(vn))
		}
		u = u[n+vn:]
		if s := fmt.Sprint(num); !slices.Contains(nums, s) {
			nums = append(nums, s)
		}
	}
	return fmt.Errorf("%s: %w: unknown field %s", what, ErrNewerFormat, strings.Join(nums, ", "))
}

// unknownEnum is the error for an enum number this build does not know.
func unknownEnum(n int32) error {
	return fmt.Errorf("%w: unknown enum value %d", ErrNewerFormat, n)
}

// unencodable is the error for a value Marshal cannot store.
func unencodable(v any) error {
	return fmt.Errorf("%w: %v", ErrUnencodable, v)
}
