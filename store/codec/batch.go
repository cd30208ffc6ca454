package codec

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/probed/probed/engine"
	storagev1 "github.com/probed/probed/proto/probed/storage/v1"
)

// MarshalBatch returns the stored form of changes committed in one
// transaction (the etcd store's P/events), in order: for each change its
// name, flags and event, and the target after it — its status, and its
// spec when SpecChanged or when the event carries the target (lifecycle
// events; the target is then stored once). Revisions are not stored: the
// store derives them from its own transaction's, so the value does not
// depend on them.
func MarshalBatch(changes []*engine.Change) ([]byte, error) {
	m := &storagev1.Batch{Changes: make([]*storagev1.BatchChange, len(changes))}
	for i, c := range changes {
		bc, err := batchChangeToProto(c)
		if err != nil {
			return nil, fmt.Errorf("change %d (%q): %w", i, c.Name, err)
		}
		m.Changes[i] = bc
	}
	return marshal(m)
}

// BatchChangeSize returns the bytes c adds to a value of MarshalBatch
// (its entry, tag and length included), computed without encoding it. The
// entry holds c's status, and its spec when c writes one, so it also
// bounds the values of MarshalStatus and MarshalSpec of c's target but
// for their version bytes and the status's revision.
func BatchChangeSize(c *engine.Change) (int, error) {
	m, err := batchChangeToProto(c)
	if err != nil {
		return 0, fmt.Errorf("change %q: %w", c.Name, err)
	}
	n := proto.MarshalOptions{Deterministic: true}.Size(m)
	return 1 + protowire.SizeVarint(uint64(n)) + n, nil
}

// UnmarshalBatch decodes a value of MarshalBatch. Revisions are zero (the
// caller sets them with Change.SetRevision). A change's Target is nil when
// it had none; its Target.Spec is nil unless SpecChanged or the event
// carried the target (a status-only change: the spec is the one stored
// before). When the event carried the change's target, Event.Target and
// Target are the same pointer, as the engine makes them.
func UnmarshalBatch(b []byte) ([]*engine.Change, error) {
	var m storagev1.Batch
	if err := unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("batch: %w", err)
	}
	if err := known(&m, "batch"); err != nil {
		return nil, err
	}
	out := make([]*engine.Change, len(m.Changes))
	for i, bc := range m.Changes {
		c, err := batchChangeFromProto(bc)
		if err != nil {
			return nil, fmt.Errorf("batch: change %d: %w", i, err)
		}
		out[i] = c
	}
	return out, nil
}

func batchChangeToProto(c *engine.Change) (*storagev1.BatchChange, error) {
	// Copies without revisions: the stored form does not depend on them.
	ev := c.Event
	ev.Revision = 0
	shared := c.Target != nil && c.Event.Target == c.Target
	if ev.Target != nil {
		t := *ev.Target
		t.Status.Revision = 0
		ev.Target = &t
	}
	em, err := eventToProto(&ev)
	if err != nil {
		return nil, err
	}
	m := &storagev1.BatchChange{
		Event: em, Delete: c.Delete, SpecChanged: c.SpecChanged, Create: c.Create, TargetInEvent: shared,
	}
	if c.Name != ev.Name {
		m.Name = &c.Name
	}
	if c.Target != nil && !shared {
		t := engine.Target{Status: c.Target.Status}
		t.Status.Revision = 0
		if c.SpecChanged {
			t.Spec = c.Target.Spec
		}
		if m.Target, err = targetToProto(&t); err != nil {
			return nil, fmt.Errorf("target.%w", err)
		}
		if t.Spec != nil && t.Spec.Name == c.Name {
			m.Target.Spec.Name = nil
		}
	}
	return m, nil
}

func batchChangeFromProto(m *storagev1.BatchChange) (*engine.Change, error) {
	if err := known(m, "change"); err != nil {
		return nil, err
	}
	if m.Event == nil {
		return nil, fmt.Errorf("%w: change without an event", ErrMalformed)
	}
	c := &engine.Change{Delete: m.Delete, SpecChanged: m.SpecChanged, Create: m.Create}
	if err := eventFromProto(m.Event, &c.Event); err != nil {
		return nil, err
	}
	c.Name = c.Event.Name
	if m.Name != nil {
		c.Name = *m.Name
	}
	switch {
	case m.TargetInEvent && m.Target != nil:
		return nil, fmt.Errorf("%w: change with its target twice", ErrMalformed)
	case m.TargetInEvent:
		if c.Event.Target == nil {
			return nil, fmt.Errorf("%w: change whose target is its event's, which has none", ErrMalformed)
		}
		c.Target = c.Event.Target
	case m.Target != nil:
		c.Target = &engine.Target{}
		if err := targetFromProto(m.Target, c.Target, c.Name, 0); err != nil {
			return nil, fmt.Errorf("target.%w", err)
		}
	}
	return c, nil
}
