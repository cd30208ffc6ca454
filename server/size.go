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

// pageLimit is the bytes of targets one ListTargets response holds: room
// is left for the page token.
const pageLimit = MaxResponseBytes - 1<<10

// fitPage returns how many of targets, from the first, fit in one
// ListTargets response of at most MaxResponseBytes (at least one). Pages
// whose bound from string lengths (sizeBound) fits, nearly all of them,
// cost no encoding pass besides gRPC's own; the others are sized exactly.
func fitPage(targets []*probev1.Target) int {
	bound := 0
	for _, t := range targets {
		if bound += sizeBound(t) + fieldOverhead; bound > pageLimit {
			break
		}
	}
	if bound <= pageLimit {
		return len(targets)
	}
	size := 0
	for i, t := range targets {
		size += proto.Size(t) + fieldOverhead
		if i > 0 && size > pageLimit {
			return i
		}
	}
	return len(targets)
}

// targetFixedBound bounds the encoded bytes of every field of a Target
// but its strings, maps and repeated fields, all set to their largest
// values: ~60 numbers, booleans and enums of at most 11 bytes with their
// tags, and ~40 messages' tags and lengths (three probes with their
// handler, TLS settings and status, the effective timing's durations, the
// timestamps, the lifecycle).
const targetFixedBound = 2048

// sizeBound returns an upper bound of the encoded size of t from the
// lengths of its strings, maps and repeated fields alone, without an
// encoding pass: each string counts with its tag and the longest length
// prefix, each map entry or repeated element with its own.
// TestSizeBoundIsAnUpperBound fills every field of a Target to keep it
// one; a string field added to a Target must be counted here.
func sizeBound(t *probev1.Target) int {
	n := targetFixedBound + str(t.GetName()) + str(t.GetOwner())
	for k, v := range t.GetLabels() {
		n += entryOverhead + str(k) + str(v)
	}
	for _, p := range [...]*probev1.Probe{t.GetStartupProbe(), t.GetLivenessProbe(), t.GetReadinessProbe()} {
		n += probeBound(p)
	}
	st := t.GetStatus()
	n += str(st.GetReplica())
	for _, ps := range [...]*probev1.ProbeStatus{st.GetStartup(), st.GetLiveness(), st.GetReadiness()} {
		n += str(ps.GetLastMessage())
	}
	return n
}

// probeBound is sizeBound's part for the strings of a probe's handler.
func probeBound(p *probev1.Probe) int {
	n := 0
	if g := p.GetHttpGet(); g != nil {
		n += str(g.GetHost()) + str(g.GetPath()) + str(g.GetExpectedBody()) + tlsBound(g.GetTls())
		for _, h := range g.GetHttpHeaders() {
			n += entryOverhead + str(h.GetName()) + str(h.GetValue())
		}
	}
	n += str(p.GetTcpSocket().GetHost())
	if g := p.GetGrpc(); g != nil {
		n += str(g.GetHost()) + str(g.GetService()) + tlsBound(g.GetTls())
	}
	for _, a := range p.GetExec().GetCommand() {
		n += str(a)
	}
	return n
}

func tlsBound(t *probev1.TLSConfig) int { return str(t.GetCaPem()) + str(t.GetServerName()) }

// entryOverhead bounds what a map entry or a repeated message adds to its
// strings: its tag and length, and those of its own fields' numbers.
const entryOverhead = 16

// str bounds the encoded size of a string field: a tag of up to 2 bytes,
// a length of up to 5, the bytes.
func str(s string) int { return len(s) + 7 }
