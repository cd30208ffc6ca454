package engine

import (
	"fmt"
	"time"

	"github.com/probed/probed/engine/probe"
)

// EventKind says what an event is about.
type EventKind uint8

// The event kinds.
const (
	// KindSnapshot: the current state of a target, in a watch's snapshot.
	KindSnapshot EventKind = iota + 1
	// KindTransition: a probe's published result changed.
	KindTransition
	// KindInitialized: a probe passed for the first time since creation or
	// reset without its published result changing (liveness starts as
	// success). When the first pass also changes the result, the
	// transition carries Initialized instead.
	KindInitialized
	KindCreated
	KindUpdated
	KindReset
	KindTerminating
	KindDeleted
)

var kindNames = [...]string{
	KindSnapshot: "SNAPSHOT", KindTransition: "TRANSITION", KindInitialized: "INITIALIZED",
	KindCreated: "CREATED", KindUpdated: "UPDATED", KindReset: "RESET",
	KindTerminating: "TERMINATING", KindDeleted: "DELETED",
}

func (k EventKind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "UNKNOWN"
}

// Lifecycle reports whether the kind is about the target as a whole (and so
// carries its Target).
func (k EventKind) Lifecycle() bool {
	return k >= KindCreated || k == KindSnapshot
}

// Reasons of events.
const (
	ReasonProbe       = "Probe"
	ReasonTerminating = "Terminating"
	ReasonReset       = "Reset"
	ReasonUpdated     = "Updated"
)

// Event is one change the engine published. Events are immutable once
// published; the Target they point to is shared.
type Event struct {
	// Revision is strictly increasing across the engine and its restarts,
	// but not contiguous.
	Revision uint64    `json:"revision"`
	Time     time.Time `json:"time"`
	Name     string    `json:"name"`
	Kind     EventKind `json:"kind"`

	// For KindTransition and KindInitialized.
	Probe       probe.Type    `json:"probe,omitempty"`
	From        probe.Result  `json:"from,omitempty"`
	To          probe.Result  `json:"to,omitempty"`
	Consecutive int32         `json:"consecutive,omitempty"`
	Latency     time.Duration `json:"latency,omitempty"`
	Initialized bool          `json:"initialized,omitempty"`

	Message string `json:"message,omitempty"`
	Reason  string `json:"reason,omitempty"`

	// Target status after the event.
	Started bool `json:"started,omitempty"`
	Ready   bool `json:"ready,omitempty"`
	Live    bool `json:"live,omitempty"`

	// Labels of the target, for label-selector filters.
	Labels map[string]string `json:"labels,omitempty"`
	// Target is the whole target after the event, for lifecycle kinds and
	// snapshots; nil for probe events.
	Target *Target `json:"target,omitempty"`
}

// size estimates the memory an event holds, for the byte bounds of the
// history and of watchers' queues: the Event itself, its strings and the
// target it carries (which a queue may keep alive after the history and
// the view let go of it).
func (e *Event) size() int {
	n := 160 + len(e.Name) + len(e.Message) + len(e.Reason)
	if e.Target != nil {
		n += targetBytes(e.Target)
	}
	return n
}

// targetBytes estimates the memory of a target: its status and its spec,
// whose strings (headers, CA bundles, labels) may make it large.
func targetBytes(t *Target) int {
	n := 512
	s := t.Spec
	if s == nil {
		return n
	}
	n += len(s.Name)
	for k, v := range s.Labels {
		n += 32 + len(k) + len(v)
	}
	for _, typ := range probe.Types {
		p := s.Probe(typ)
		if p == nil {
			continue
		}
		n += 256
		h := &p.Handler
		switch {
		case h.HTTPGet != nil:
			g := h.HTTPGet
			n += len(g.Host) + len(g.Path) + len(g.ExpectedBody) + tlsBytes(g.TLS)
			for _, hd := range g.Headers {
				n += 32 + len(hd.Name) + len(hd.Value)
			}
		case h.TCPSocket != nil:
			n += len(h.TCPSocket.Host)
		case h.GRPC != nil:
			n += len(h.GRPC.Host) + tlsBytes(h.GRPC.TLS)
			if h.GRPC.Service != nil {
				n += len(*h.GRPC.Service)
			}
		case h.Exec != nil:
			for _, a := range h.Exec.Command {
				n += 16 + len(a)
			}
		}
	}
	return n
}

func tlsBytes(t *probe.TLS) int {
	if t == nil {
		return 0
	}
	return 32 + len(t.CAPEM) + len(t.ServerName)
}

// MarshalText encodes the kind by name.
func (k EventKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText decodes a name written by MarshalText.
func (k *EventKind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if n != "" && n == string(b) {
			*k = EventKind(i)
			return nil
		}
	}
	return fmt.Errorf("unknown event kind %q", b)
}
