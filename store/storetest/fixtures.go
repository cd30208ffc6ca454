package storetest

import (
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// Epoch is the time the fixtures start at. Its zone is not UTC, so a
// store that keeps instants but not zones still compares equal (the tests
// compare times with time.Time.Equal).
var Epoch = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("UTC+1", 3600))

func ptr[T any](v T) *T { return &v }

// WebSpec is a target with all three probes: HTTP startup probe setting
// every *Milliseconds field (one of them to 0, one negative), an
// initialization failure threshold and headers; TCP liveness; gRPC
// readiness with a service and TLS; labels; a preStop sleep of 0 seconds
// (allowed only behind a gate, and kept on update by ratcheting, so it
// must survive a restart exactly) and a grace period.
func WebSpec(name string) *target.Spec {
	return &target.Spec{
		Name:   name,
		Labels: map[string]string{"app": "web", "tier": "frontend"},
		StartupProbe: &probe.Spec{
			Handler: probe.Handler{HTTPGet: &probe.HTTPGet{
				Host: "10.0.0.1", Port: 8080, Path: "/healthz", Scheme: probe.SchemeHTTPS,
				Headers:      []probe.Header{{Name: "X-Probe", Value: "startup"}},
				ExpectedBody: "ok",
				TLS:          &probe.TLS{InsecureSkipVerify: true, ServerName: "web.internal"},
			}},
			PeriodSeconds:                  1,
			FailureThreshold:               30,
			InitialDelayMilliseconds:       ptr[int32](0),
			TimeoutMilliseconds:            ptr[int32](-500),
			PeriodMilliseconds:             ptr[int32](500),
			InitialPeriodMilliseconds:      ptr[int32](250),
			InitializationFailureThreshold: ptr[int32](60),
		},
		LivenessProbe: &probe.Spec{
			Handler:       probe.Handler{TCPSocket: &probe.TCPSocket{Host: "10.0.0.1", Port: 8080}},
			PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3,
		},
		ReadinessProbe: &probe.Spec{
			Handler: probe.Handler{GRPC: &probe.GRPC{
				Host: "10.0.0.1", Port: 9090, Service: ptr(""),
				TLS: &probe.TLS{CAPEM: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
			}},
			InitialDelaySeconds: 5, SuccessThreshold: 2,
			InitialPeriodSeconds: ptr[int32](1),
		},
		Lifecycle:                     &target.Lifecycle{PreStop: &target.Handler{Sleep: &target.SleepAction{Seconds: 0}}},
		TerminationGracePeriodSeconds: ptr[int64](45),
	}
}

// TCPSpec is a target with one TCP readiness probe, a preStop sleep of 5
// seconds and a grace period of 0 (a set pointer to zero).
func TCPSpec(name string) *target.Spec {
	return &target.Spec{
		Name:   name,
		Labels: map[string]string{"app": "db"},
		ReadinessProbe: &probe.Spec{
			Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: "db.internal", Port: 5432}},
		},
		Lifecycle:                     &target.Lifecycle{PreStop: &target.Handler{Sleep: &target.SleepAction{Seconds: 5}}},
		TerminationGracePeriodSeconds: ptr[int64](0),
	}
}

// BareSpec is a target with no probes, labels or lifecycle.
func BareSpec(name string) *target.Spec { return &target.Spec{Name: name} }

// Specs returns new fixture specs: WebSpec("web"), TCPSpec("db") and
// BareSpec("bare").
func Specs() []*target.Spec {
	return []*target.Spec{WebSpec("web"), TCPSpec("db"), BareSpec("bare")}
}

// NewStatus is the status of spec's target just created at t: active,
// every probe it has present at its initial result. The live fields are
// set too, as the engine would have them; a store must not keep them.
func NewStatus(spec *target.Spec, t time.Time) engine.Status {
	st := engine.Status{Phase: engine.Active, CreateTime: t, StartTime: t}
	for _, typ := range probe.Types {
		p := spec.Probe(typ)
		if p == nil {
			continue
		}
		st.Probes[typ] = engine.ProbeStatus{
			Present:     true,
			Result:      probe.Initial(typ).Result,
			Effective:   p.Effective(),
			LastMessage: "not probed yet",
		}
	}
	return st
}

// Create registers spec at t: SpecChanged, a CREATED event carrying the
// target (the same pointer as Change.Target).
func Create(spec *target.Spec, t time.Time) *engine.Change {
	tg := &engine.Target{Spec: spec, Status: NewStatus(spec, t)}
	return lifecycle(tg, true, engine.KindCreated, "", t)
}

// Update replaces prev's spec with spec at t (SpecChanged, UPDATED event
// with the target).
func Update(prev *engine.Target, spec *target.Spec, t time.Time) *engine.Change {
	tg := &engine.Target{Spec: spec, Status: prev.Status}
	return lifecycle(tg, true, engine.KindUpdated, engine.ReasonUpdated, t)
}

// Reset restarts prev's probes at t: status only, RESET event with the
// target.
func Reset(prev *engine.Target, t time.Time) *engine.Change {
	st := NewStatus(prev.Spec, prev.Status.CreateTime)
	st.StartTime = t
	return lifecycle(&engine.Target{Spec: prev.Spec, Status: st}, false, engine.KindReset, engine.ReasonReset, t)
}

// Terminate starts prev's termination at t: status only (phase
// Terminating, DeleteTime), TERMINATING event with the target.
func Terminate(prev *engine.Target, t time.Time) *engine.Change {
	tg := &engine.Target{Spec: prev.Spec, Status: prev.Status}
	tg.Status.Phase = engine.Terminating
	tg.Status.DeleteTime = t
	return lifecycle(tg, false, engine.KindTerminating, engine.ReasonTerminating, t)
}

func lifecycle(tg *engine.Target, specChanged bool, kind engine.EventKind, reason string, t time.Time) *engine.Change {
	return &engine.Change{
		Name:        tg.Spec.Name,
		Target:      tg,
		SpecChanged: specChanged,
		Event: engine.Event{
			Time: t, Name: tg.Spec.Name, Kind: kind, Reason: reason,
			Started: tg.Status.Started(), Ready: tg.Status.Ready(), Live: tg.Status.Live(),
			Labels: tg.Spec.Labels,
			Target: tg,
		},
	}
}

// Delete removes the target name at t: Delete, a DELETED event without a
// target.
func Delete(name string, t time.Time) *engine.Change {
	return &engine.Change{
		Name:   name,
		Delete: true,
		Event:  engine.Event{Time: t, Name: name, Kind: engine.KindDeleted, Reason: engine.ReasonTerminating},
	}
}

// Transition publishes result to for prev's probe typ at t, after
// consecutive raw outcomes: status only, a TRANSITION event without the
// target (Initialized on the first success). The new status's live fields
// are set, as the engine would have them.
func Transition(prev *engine.Target, typ probe.Type, to probe.Result, consecutive int32, t time.Time) *engine.Change {
	tg := &engine.Target{Spec: prev.Spec, Status: prev.Status}
	ps := &tg.Status.Probes[typ]
	from := ps.Result
	initialized := to == probe.Success && !ps.HasInitialized
	ps.Present = true
	ps.Result = to
	ps.HasInitialized = ps.HasInitialized || to == probe.Success
	ps.LastTransitionTime = t
	ps.LastProbeTime = t
	ps.LastLatency = 3 * time.Millisecond
	ps.LastMessage = "probe " + to.String()
	ps.ProbesTotal++
	ps.ConsecutiveSuccesses, ps.ConsecutiveFailures = 0, 0
	if to == probe.Success {
		ps.ConsecutiveSuccesses = consecutive
	} else {
		ps.ConsecutiveFailures = consecutive
	}
	return &engine.Change{
		Name:   prev.Spec.Name,
		Target: tg,
		Event: engine.Event{
			Time: t, Name: prev.Spec.Name, Kind: engine.KindTransition,
			Probe: typ, From: from, To: to, Consecutive: consecutive, Latency: ps.LastLatency,
			Initialized: initialized, Message: ps.LastMessage, Reason: engine.ReasonProbe,
			Started: tg.Status.Started(), Ready: tg.Status.Ready(), Live: tg.Status.Live(),
			Labels: prev.Spec.Labels,
		},
	}
}

// Durable returns a copy of t with only what a store keeps: the live
// fields of every probe status are zero. The Spec is shared.
func Durable(t *engine.Target) *engine.Target {
	if t == nil {
		return nil
	}
	return &engine.Target{Spec: t.Spec, Status: DurableStatus(t.Status)}
}

// DurableStatus returns st with the live fields of every probe zero.
func DurableStatus(st engine.Status) engine.Status {
	for i, p := range st.Probes {
		st.Probes[i] = engine.ProbeStatus{
			Present:            p.Present,
			Result:             p.Result,
			HasInitialized:     p.HasInitialized,
			LastTransitionTime: p.LastTransitionTime,
		}
	}
	return st
}

// DurableEvent returns a copy of ev whose Target (if any) is Durable.
func DurableEvent(ev engine.Event) engine.Event {
	ev.Target = Durable(ev.Target)
	return ev
}
