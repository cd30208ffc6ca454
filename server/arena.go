package server

import (
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// arena allocates the messages of one response in chunks. A ListTargets
// page of 100 targets is over a thousand messages (a target, its status,
// each probe, its status, its handler, four or five timestamps...);
// allocated one by one, the allocations and the collector's work for them
// were a third of a page's CPU (docs/decisions.md, issue 34, "arena"). In
// chunks they are a few dozen allocations. A nil arena allocates each
// message on its own, for responses of one target.
//
// The messages of an arena live as long as any one of them: hand its
// messages to one response only.
type arena struct {
	chunk         int // messages per chunk
	targets       []probev1.Target
	statuses      []probev1.TargetStatus
	probeStatuses []probev1.ProbeStatus
	probes        []probev1.Probe
	times         []timestamppb.Timestamp
	durations     []durationpb.Duration
	tcp           []probev1.TCPSocketAction
	tcpHandlers   []probev1.Probe_TcpSocket
	http          []probev1.HTTPGetAction
	httpHandlers  []probev1.Probe_HttpGet
	grpc          []probev1.GRPCAction
	grpcHandlers  []probev1.Probe_Grpc
}

// newArena returns an arena for the messages of about n targets.
func newArena(n int) *arena { return &arena{chunk: max(n, 1)} }

// next returns the next zero T of *c, a new chunk when it is full (the
// messages handed out keep the old one alive).
func next[T any](chunk int, c *[]T) *T {
	if len(*c) == cap(*c) {
		*c = make([]T, 0, chunk)
	}
	*c = (*c)[:len(*c)+1]
	return &(*c)[len(*c)-1]
}

func (a *arena) target() *probev1.Target {
	if a == nil {
		return new(probev1.Target)
	}
	return next(a.chunk, &a.targets)
}

func (a *arena) status() *probev1.TargetStatus {
	if a == nil {
		return new(probev1.TargetStatus)
	}
	return next(a.chunk, &a.statuses)
}

func (a *arena) probeStatus() *probev1.ProbeStatus {
	if a == nil {
		return new(probev1.ProbeStatus)
	}
	return next(a.chunk, &a.probeStatuses)
}

func (a *arena) probe() *probev1.Probe {
	if a == nil {
		return new(probev1.Probe)
	}
	return next(a.chunk, &a.probes)
}

func (a *arena) time() *timestamppb.Timestamp {
	if a == nil {
		return new(timestamppb.Timestamp)
	}
	return next(a.chunk, &a.times)
}

func (a *arena) duration() *durationpb.Duration {
	if a == nil {
		return new(durationpb.Duration)
	}
	return next(a.chunk, &a.durations)
}

func (a *arena) tcpSocket() (*probev1.Probe_TcpSocket, *probev1.TCPSocketAction) {
	if a == nil {
		return new(probev1.Probe_TcpSocket), new(probev1.TCPSocketAction)
	}
	return next(a.chunk, &a.tcpHandlers), next(a.chunk, &a.tcp)
}

func (a *arena) httpGet() (*probev1.Probe_HttpGet, *probev1.HTTPGetAction) {
	if a == nil {
		return new(probev1.Probe_HttpGet), new(probev1.HTTPGetAction)
	}
	return next(a.chunk, &a.httpHandlers), next(a.chunk, &a.http)
}

func (a *arena) grpcAction() (*probev1.Probe_Grpc, *probev1.GRPCAction) {
	if a == nil {
		return new(probev1.Probe_Grpc), new(probev1.GRPCAction)
	}
	return next(a.chunk, &a.grpcHandlers), next(a.chunk, &a.grpc)
}
