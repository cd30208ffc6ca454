package codec

import (
	"fmt"
	"maps"
	"time"

	"github.com/probed/probed/engine"
	storagev1 "github.com/probed/probed/proto/probed/storage/v1"
)

// MarshalEvent returns the stored form of ev; its Target (if any) keeps
// only its durable fields.
func MarshalEvent(ev *engine.Event) ([]byte, error) {
	m, err := eventToProto(ev)
	if err != nil {
		return nil, err
	}
	return marshal(m)
}

// UnmarshalEvent decodes a value of MarshalEvent into ev.
func UnmarshalEvent(b []byte, ev *engine.Event) error {
	var m storagev1.Event
	if err := unmarshal(b, &m); err != nil {
		return fmt.Errorf("event: %w", err)
	}
	return eventFromProto(&m, ev)
}

// aboutProbe reports whether events of kind k are about one probe (and so
// have meaningful Probe, From and To).
func aboutProbe(k engine.EventKind) bool {
	return k == engine.KindTransition || k == engine.KindInitialized
}

func eventToProto(ev *engine.Event) (*storagev1.Event, error) {
	kind, err := kindToProto(ev.Kind)
	if err != nil {
		return nil, fmt.Errorf("event.kind: %w", err)
	}
	m := &storagev1.Event{
		Revision: ev.Revision, Name: ev.Name, Kind: kind,
		Consecutive: ev.Consecutive, LatencyNanos: int64(ev.Latency), Initialized: ev.Initialized,
		Message: ev.Message, Reason: ev.Reason,
		Started: ev.Started, Ready: ev.Ready, Live: ev.Live,
	}
	if m.TimeUnixNano, err = timeToProto(ev.Time, "event.time"); err != nil {
		return nil, err
	}
	// Lifecycle events leave Probe, From and To zero: not stored.
	if aboutProbe(ev.Kind) || ev.Probe != 0 {
		if m.Probe, err = typeToProto(ev.Probe); err != nil {
			return nil, fmt.Errorf("event.probe: %w", err)
		}
	}
	if aboutProbe(ev.Kind) || ev.From != 0 || ev.To != 0 {
		if m.From, err = resultToProto(ev.From); err != nil {
			return nil, fmt.Errorf("event.from: %w", err)
		}
		if m.To, err = resultToProto(ev.To); err != nil {
			return nil, fmt.Errorf("event.to: %w", err)
		}
	}
	if t := ev.Target; t != nil {
		if m.Target, err = targetToProto(t); err != nil {
			return nil, fmt.Errorf("event.target.%w", err)
		}
		// What the event says already is not stored again.
		if t.Spec != nil && t.Spec.Name == ev.Name {
			m.Target.Spec.Name = nil
		}
		m.Target.Status.Revision = nil
		if t.Status.Revision != ev.Revision {
			m.Target.Status.Revision = &t.Status.Revision
		}
		m.LabelsFromTarget = t.Spec != nil && len(ev.Labels) > 0 && maps.Equal(ev.Labels, t.Spec.Labels)
	}
	if !m.LabelsFromTarget {
		m.Labels = labelsToProto(ev.Labels)
	}
	return m, nil
}

func eventFromProto(m *storagev1.Event, ev *engine.Event) error {
	if err := known(m, "event"); err != nil {
		return err
	}
	kind, err := kindFromProto(m.Kind)
	if err != nil {
		return fmt.Errorf("event.kind: %w", err)
	}
	*ev = engine.Event{
		Revision: m.Revision, Time: timeFromProto(m.TimeUnixNano), Name: m.Name, Kind: kind,
		Consecutive: m.Consecutive, Latency: time.Duration(m.LatencyNanos), Initialized: m.Initialized,
		Message: m.Message, Reason: m.Reason,
		Started: m.Started, Ready: m.Ready, Live: m.Live,
	}
	if ev.Labels, err = labelsFromProto(m.Labels, "event.labels"); err != nil {
		return err
	}
	if ev.Probe, err = typeFromProto(m.Probe); err != nil {
		return fmt.Errorf("event.probe: %w", err)
	}
	if ev.From, err = resultFromProto(m.From); err != nil {
		return fmt.Errorf("event.from: %w", err)
	}
	if ev.To, err = resultFromProto(m.To); err != nil {
		return fmt.Errorf("event.to: %w", err)
	}
	if m.Target != nil {
		if err := known(m.Target, "event.target"); err != nil {
			return err
		}
		ev.Target = &engine.Target{}
		if err := targetFromProto(m.Target, ev.Target, ev.Name, ev.Revision); err != nil {
			return fmt.Errorf("event.target.%w", err)
		}
	}
	if m.LabelsFromTarget {
		if ev.Target == nil || ev.Target.Spec == nil || len(m.Labels) > 0 {
			return fmt.Errorf("event: %w: labels from a target it does not have, or twice", ErrMalformed)
		}
		ev.Labels = ev.Target.Spec.Labels
	}
	return nil
}
