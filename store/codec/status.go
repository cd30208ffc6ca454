package codec

import (
	"fmt"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	storagev1 "github.com/probed/probed/proto/probed/storage/v1"
)

// Status stores the probes by type in three fields: a fourth probe type
// needs a field in storage.proto (this fails to compile until then).
var _ = [1]struct{}{}[probe.NumTypes-3]

// MarshalStatus returns the stored form of the durable fields of s.
func MarshalStatus(s *engine.Status) ([]byte, error) {
	m, err := statusToProto(s)
	if err != nil {
		return nil, err
	}
	return marshal(m)
}

// UnmarshalStatus decodes a value of MarshalStatus into s; the live
// fields are zero.
func UnmarshalStatus(b []byte, s *engine.Status) error {
	var m storagev1.Status
	if err := unmarshal(b, &m); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	return statusFromProto(&m, s, 0)
}

// MarshalTarget returns the stored form of t: its spec (if any) and the
// durable fields of its status.
func MarshalTarget(t *engine.Target) ([]byte, error) {
	m, err := targetToProto(t)
	if err != nil {
		return nil, err
	}
	return marshal(m)
}

// UnmarshalTarget decodes a value of MarshalTarget into t.
func UnmarshalTarget(b []byte, t *engine.Target) error {
	var m storagev1.Target
	if err := unmarshal(b, &m); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if err := known(&m, "target"); err != nil {
		return err
	}
	return targetFromProto(&m, t, "", 0)
}

func targetToProto(t *engine.Target) (*storagev1.Target, error) {
	m := &storagev1.Target{}
	if t.Spec != nil {
		var err error
		if m.Spec, err = specToProto(t.Spec); err != nil {
			return nil, err
		}
	}
	var err error
	if m.Status, err = statusToProto(&t.Status); err != nil {
		return nil, err
	}
	return m, nil
}

// targetFromProto decodes m into t; an absent spec name is name, an
// absent status revision is rev.
func targetFromProto(m *storagev1.Target, t *engine.Target, name string, rev uint64) error {
	if err := known(m, "target"); err != nil {
		return err
	}
	*t = engine.Target{}
	if m.Spec != nil {
		t.Spec = &target.Spec{}
		if err := specFromProto(m.Spec, t.Spec, name); err != nil {
			return err
		}
	}
	if m.Status == nil {
		m.Status = &storagev1.Status{}
	}
	return statusFromProto(m.Status, &t.Status, rev)
}

func statusToProto(s *engine.Status) (*storagev1.Status, error) {
	phase, err := phaseToProto(s.Phase)
	if err != nil {
		return nil, fmt.Errorf("status.phase: %w", err)
	}
	m := &storagev1.Status{Phase: phase, Client: s.Client, Owner: s.Owner}
	if s.Revision != 0 {
		m.Revision = &s.Revision
	}
	if d := s.DeletionGracePeriod; d != nil {
		m.DeletionGracePeriodNanos = (*int64)(d)
	}
	times := [...]struct {
		t    time.Time
		dst  **int64
		what string
	}{
		{s.CreateTime, &m.CreateTimeUnixNano, "status.createTime"},
		{s.StartTime, &m.StartTimeUnixNano, "status.startTime"},
		{s.DeleteTime, &m.DeleteTimeUnixNano, "status.deleteTime"},
	}
	for _, tm := range times {
		if *tm.dst, err = timeToProto(tm.t, tm.what); err != nil {
			return nil, err
		}
	}
	probes := [...]**storagev1.ProbeStatus{&m.Startup, &m.Liveness, &m.Readiness}
	for i, dst := range probes {
		if *dst, err = probeStatusToProto(&s.Probes[i], &probeStatusPaths[i]); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// statusFromProto decodes m into s; an absent revision is rev.
func statusFromProto(m *storagev1.Status, s *engine.Status, rev uint64) error {
	if err := known(m, "status"); err != nil {
		return err
	}
	phase, err := phaseFromProto(m.Phase)
	if err != nil {
		return fmt.Errorf("status.phase: %w", err)
	}
	*s = engine.Status{
		Phase:      phase,
		CreateTime: timeFromProto(m.CreateTimeUnixNano),
		Client:     m.Client,
		Owner:      m.Owner,
		StartTime:  timeFromProto(m.StartTimeUnixNano),
		DeleteTime: timeFromProto(m.DeleteTimeUnixNano),
		Revision:   rev,
	}
	if m.Revision != nil {
		s.Revision = *m.Revision
	}
	if d := m.DeletionGracePeriodNanos; d != nil {
		s.DeletionGracePeriod = (*time.Duration)(d)
	}
	probes := [...]*storagev1.ProbeStatus{m.Startup, m.Liveness, m.Readiness}
	for i, p := range probes {
		if err := probeStatusFromProto(p, &s.Probes[i], &probeStatusPaths[i]); err != nil {
			return err
		}
	}
	return nil
}

// probeStatusPath names a probe's status in errors (built once, like
// probePath).
type probeStatusPath struct{ self, result, lastTransitionTime string }

var probeStatusPaths = func() (ps [probe.NumTypes]probeStatusPath) {
	for i, t := range probe.Types {
		p := "status." + t.String()
		ps[i] = probeStatusPath{self: p, result: p + ".result", lastTransitionTime: p + ".lastTransitionTime"}
	}
	return ps
}()

// probeStatusToProto returns the durable fields of p, nil when they are
// all zero.
func probeStatusToProto(p *engine.ProbeStatus, path *probeStatusPath) (*storagev1.ProbeStatus, error) {
	if !p.Present && p.Result == probe.Unknown && !p.HasInitialized && p.LastTransitionTime.IsZero() {
		return nil, nil
	}
	result, err := resultToProto(p.Result)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path.result, err)
	}
	last, err := timeToProto(p.LastTransitionTime, path.lastTransitionTime)
	if err != nil {
		return nil, err
	}
	return &storagev1.ProbeStatus{
		Present: p.Present, Result: result, HasInitialized: p.HasInitialized, LastTransitionTimeUnixNano: last,
	}, nil
}

func probeStatusFromProto(m *storagev1.ProbeStatus, p *engine.ProbeStatus, path *probeStatusPath) error {
	if m == nil {
		return nil
	}
	if err := known(m, path.self); err != nil {
		return err
	}
	result, err := resultFromProto(m.Result)
	if err != nil {
		return fmt.Errorf("%s: %w", path.result, err)
	}
	*p = engine.ProbeStatus{
		Present: m.Present, Result: result, HasInitialized: m.HasInitialized,
		LastTransitionTime: timeFromProto(m.LastTransitionTimeUnixNano),
	}
	return nil
}
