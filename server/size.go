package server

import (
	"google.golang.org/protobuf/proto"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// MaxResponseBytes bounds the encoded size of one ListTargets page or one
// Watch message, under the 4 MiB that gRPC clients accept by default
// (grpc-go, grpcurl, probectl): a page of many large targets, or a batch of
// many events, is split rather than refused by the client with
// ResourceExhausted. A single target is far smaller (validation bounds its
// spec, and each probe message is at most probe.MaxMessageBytes), so every
// response holds at least one.
const MaxResponseBytes = 3 << 20

// fieldOverhead over-estimates the bytes a repeated message field adds to
// its element's size (tag and length).
const fieldOverhead = 8

// sendEvents sends the events of one engine batch as one or more Watch
// messages of at most MaxResponseBytes each, in order. Every message but
// the last has the batch's snapshot flag and, as its revision, the
// snapshot's (a snapshot) or its own last event's (everything up to it
// was sent); the last one carries the batch's revision and its
// snapshotComplete.
func sendEvents(send func(*probev1.WatchResponse) error, events []*probev1.Event, snapshot, complete bool, revision uint64) error {
	if fitsOneResponse(events) { // most batches: no size pass before gRPC's own
		return send(&probev1.WatchResponse{Events: events, Snapshot: snapshot, SnapshotComplete: complete, Revision: revision})
	}
	start, size := 0, 0
	for i, ev := range events {
		n := proto.Size(ev) + fieldOverhead
		if i > start && size+n > MaxResponseBytes {
			part := &probev1.WatchResponse{Events: events[start:i], Snapshot: snapshot, Revision: revision}
			if !snapshot {
				part.Revision = events[i-1].GetRevision()
			}
			if err := send(part); err != nil {
				return err
			}
			start, size = i, 0
		}
		size += n
	}
	return send(&probev1.WatchResponse{Events: events[start:], Snapshot: snapshot, SnapshotComplete: complete, Revision: revision})
}

// fitsOneResponse reports whether events surely fit in one Watch
// message, from an upper bound of each event's size that reads only the
// lengths of its strings: events without a target (probe events, most of
// a live watch) cost no encoding pass. It may say false for events that
// would fit.
func fitsOneResponse(events []*probev1.Event) bool {
	const fixed = 128 // every field but the strings and the target, with tags and lengths (a string field added to Event must be counted below)
	size := 0
	for _, ev := range events {
		if ev.GetTarget() != nil {
			return false
		}
		size += fixed + len(ev.GetName()) + len(ev.GetMessage()) + len(ev.GetReason())
		if size > MaxResponseBytes {
			return false
		}
	}
	return true
}

// fitPage returns how many of targets, from the first, fit in one
// ListTargets response of at most MaxResponseBytes (at least one).
func fitPage(targets []*probev1.Target) int {
	size := 0
	for i, t := range targets {
		size += proto.Size(t) + fieldOverhead
		if i > 0 && size > MaxResponseBytes-1<<10 { // room for the page token
			return i
		}
	}
	return len(targets)
}
