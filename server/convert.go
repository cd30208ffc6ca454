package server

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// This file converts between the API (probev1) and the domain (engine).
// Conversions never fail: whatever the API can express is converted and
// the engine's validation names what is wrong, with the API's JSON paths.

// toSpec converts a target as a client sent it; its status is ignored.
func toSpec(t *probev1.Target) *target.Spec {
	s := &target.Spec{
		Name:                          t.GetName(),
		Labels:                        maps.Clone(t.GetLabels()),
		StartupProbe:                  toProbe(t.GetStartupProbe()),
		LivenessProbe:                 toProbe(t.GetLivenessProbe()),
		ReadinessProbe:                toProbe(t.GetReadinessProbe()),
		TerminationGracePeriodSeconds: copyPtr(t.TerminationGracePeriodSeconds),
	}
	if len(s.Labels) == 0 {
		s.Labels = nil
	}
	if l := t.GetLifecycle(); l != nil {
		s.Lifecycle = &target.Lifecycle{}
		if ps := l.GetPreStop(); ps != nil {
			s.Lifecycle.PreStop = &target.Handler{}
			if sl := ps.GetSleep(); sl != nil {
				s.Lifecycle.PreStop.Sleep = &target.SleepAction{Seconds: sl.GetSeconds()}
			}
		}
	}
	return s
}

func toProbe(p *probev1.Probe) *probe.Spec {
	if p == nil {
		return nil
	}
	s := &probe.Spec{
		InitialDelaySeconds:            p.GetInitialDelaySeconds(),
		TimeoutSeconds:                 p.GetTimeoutSeconds(),
		PeriodSeconds:                  p.GetPeriodSeconds(),
		SuccessThreshold:               p.GetSuccessThreshold(),
		FailureThreshold:               p.GetFailureThreshold(),
		InitialDelayMilliseconds:       copyPtr(p.InitialDelayMilliseconds),
		TimeoutMilliseconds:            copyPtr(p.TimeoutMilliseconds),
		PeriodMilliseconds:             copyPtr(p.PeriodMilliseconds),
		InitializationFailureThreshold: copyPtr(p.InitializationFailureThreshold),
		InitialPeriodSeconds:           copyPtr(p.InitialPeriodSeconds),
		InitialPeriodMilliseconds:      copyPtr(p.InitialPeriodMilliseconds),
	}
	switch h := p.GetHandler().(type) {
	case *probev1.Probe_HttpGet:
		g := h.HttpGet
		s.Handler.HTTPGet = &probe.HTTPGet{
			Host:             g.GetHost(),
			Port:             g.GetPort(),
			Path:             g.GetPath(),
			Scheme:           toScheme(g.GetScheme()),
			ExpectedBody:     g.GetExpectedBody(),
			DisableKeepAlive: g.GetDisableKeepAlive(),
			TLS:              toTLS(g.GetTls()),
		}
		for _, hd := range g.GetHttpHeaders() {
			s.Handler.HTTPGet.Headers = append(s.Handler.HTTPGet.Headers, probe.Header{Name: hd.GetName(), Value: hd.GetValue()})
		}
	case *probev1.Probe_TcpSocket:
		s.Handler.TCPSocket = &probe.TCPSocket{Host: h.TcpSocket.GetHost(), Port: h.TcpSocket.GetPort()}
	case *probev1.Probe_Grpc:
		s.Handler.GRPC = &probe.GRPC{Host: h.Grpc.GetHost(), Port: h.Grpc.GetPort(), Service: copyPtr(h.Grpc.Service), TLS: toTLS(h.Grpc.GetTls())}
	case *probev1.Probe_Exec:
		s.Handler.Exec = &probe.Exec{Command: append([]string(nil), h.Exec.GetCommand()...)}
	}
	return s
}

func toScheme(s probev1.Scheme) probe.Scheme {
	switch s {
	case probev1.Scheme_SCHEME_UNSPECIFIED:
		return ""
	case probev1.Scheme_SCHEME_HTTP:
		return probe.SchemeHTTP
	case probev1.Scheme_SCHEME_HTTPS:
		return probe.SchemeHTTPS
	default:
		return probe.Scheme(fmt.Sprintf("Scheme(%d)", int32(s))) // rejected by validation
	}
}

func toTLS(t *probev1.TLSConfig) *probe.TLS {
	if t == nil {
		return nil
	}
	return &probe.TLS{CAPEM: t.GetCaPem(), InsecureSkipVerify: t.GetInsecureSkipVerify(), ServerName: t.GetServerName()}
}

// The enums: each pairs the API's values with the domain's. An API value
// without a pair (UNSPECIFIED, or a number from a newer client) converts to
// nothing, and validation names the field.
type enumPair[A, D comparable] struct {
	api    A
	domain D
}

func toDomain[A, D comparable](pairs []enumPair[A, D], v A) (D, bool) {
	for _, p := range pairs {
		if p.api == v {
			return p.domain, true
		}
	}
	var zero D
	return zero, false
}

func toAPI[A, D comparable](pairs []enumPair[A, D], v D) A {
	for _, p := range pairs {
		if p.domain == v {
			return p.api
		}
	}
	var zero A // UNSPECIFIED
	return zero
}

var (
	probeTypes = []enumPair[probev1.ProbeType, probe.Type]{
		{probev1.ProbeType_PROBE_TYPE_STARTUP, probe.Startup},
		{probev1.ProbeType_PROBE_TYPE_LIVENESS, probe.Liveness},
		{probev1.ProbeType_PROBE_TYPE_READINESS, probe.Readiness},
	}
	results = []enumPair[probev1.Result, probe.Result]{
		{probev1.Result_RESULT_UNKNOWN, probe.Unknown},
		{probev1.Result_RESULT_SUCCESS, probe.Success},
		{probev1.Result_RESULT_FAILURE, probe.Failure},
	}
	phases = []enumPair[probev1.Phase, engine.Phase]{
		{probev1.Phase_PHASE_ACTIVE, engine.Active},
		{probev1.Phase_PHASE_TERMINATING, engine.Terminating},
	}
	eventKinds = []enumPair[probev1.EventKind, engine.EventKind]{
		{probev1.EventKind_EVENT_KIND_SNAPSHOT, engine.KindSnapshot},
		{probev1.EventKind_EVENT_KIND_TRANSITION, engine.KindTransition},
		{probev1.EventKind_EVENT_KIND_INITIALIZED, engine.KindInitialized},
		{probev1.EventKind_EVENT_KIND_CREATED, engine.KindCreated},
		{probev1.EventKind_EVENT_KIND_UPDATED, engine.KindUpdated},
		{probev1.EventKind_EVENT_KIND_RESET, engine.KindReset},
		{probev1.EventKind_EVENT_KIND_TERMINATING, engine.KindTerminating},
		{probev1.EventKind_EVENT_KIND_DELETED, engine.KindDeleted},
	}
)

// fromTarget converts a target with its status. The result shares what
// the engine never modifies (the spec's label map) and the effective
// timings of sharedEffectives: it is only to be encoded (gRPC, protojson),
// never modified.
func fromTarget(a *arena, t *engine.Target) *probev1.Target {
	s := t.Spec
	out := a.target()
	*out = probev1.Target{
		Name:                          s.Name,
		Labels:                        s.Labels,
		StartupProbe:                  fromProbe(a, s.StartupProbe),
		LivenessProbe:                 fromProbe(a, s.LivenessProbe),
		ReadinessProbe:                fromProbe(a, s.ReadinessProbe),
		TerminationGracePeriodSeconds: copyPtr(s.TerminationGracePeriodSeconds),
		Status:                        fromStatus(a, &t.Status, s),
		Owner:                         t.Status.Owner,
	}
	if l := s.Lifecycle; l != nil {
		out.Lifecycle = &probev1.Lifecycle{}
		if l.PreStop != nil {
			out.Lifecycle.PreStop = &probev1.LifecycleHandler{}
			if l.PreStop.Sleep != nil {
				out.Lifecycle.PreStop.Action = &probev1.LifecycleHandler_Sleep{Sleep: &probev1.SleepAction{Seconds: l.PreStop.Sleep.Seconds}}
			}
		}
	}
	return out
}

func fromProbe(a *arena, p *probe.Spec) *probev1.Probe {
	if p == nil {
		return nil
	}
	out := a.probe()
	*out = probev1.Probe{
		InitialDelaySeconds:            p.InitialDelaySeconds,
		TimeoutSeconds:                 p.TimeoutSeconds,
		PeriodSeconds:                  p.PeriodSeconds,
		SuccessThreshold:               p.SuccessThreshold,
		FailureThreshold:               p.FailureThreshold,
		InitialDelayMilliseconds:       copyPtr(p.InitialDelayMilliseconds),
		TimeoutMilliseconds:            copyPtr(p.TimeoutMilliseconds),
		PeriodMilliseconds:             copyPtr(p.PeriodMilliseconds),
		InitializationFailureThreshold: copyPtr(p.InitializationFailureThreshold),
		InitialPeriodSeconds:           copyPtr(p.InitialPeriodSeconds),
		InitialPeriodMilliseconds:      copyPtr(p.InitialPeriodMilliseconds),
	}
	h := p.Handler
	switch {
	case h.HTTPGet != nil:
		handler, g := a.httpGet()
		*g = probev1.HTTPGetAction{
			Host:             h.HTTPGet.Host,
			Port:             h.HTTPGet.Port,
			Path:             h.HTTPGet.Path,
			Scheme:           fromScheme(h.HTTPGet.Scheme),
			ExpectedBody:     h.HTTPGet.ExpectedBody,
			DisableKeepAlive: h.HTTPGet.DisableKeepAlive,
			Tls:              fromTLS(h.HTTPGet.TLS),
		}
		for _, hd := range h.HTTPGet.Headers {
			g.HttpHeaders = append(g.HttpHeaders, &probev1.HTTPHeader{Name: hd.Name, Value: hd.Value})
		}
		handler.HttpGet = g
		out.Handler = handler
	case h.TCPSocket != nil:
		handler, tcp := a.tcpSocket()
		*tcp = probev1.TCPSocketAction{Host: h.TCPSocket.Host, Port: h.TCPSocket.Port}
		handler.TcpSocket = tcp
		out.Handler = handler
	case h.GRPC != nil:
		handler, g := a.grpcAction()
		*g = probev1.GRPCAction{Host: h.GRPC.Host, Port: h.GRPC.Port, Service: copyPtr(h.GRPC.Service), Tls: fromTLS(h.GRPC.TLS)}
		handler.Grpc = g
		out.Handler = handler
	case h.Exec != nil:
		out.Handler = &probev1.Probe_Exec{Exec: &probev1.ExecAction{Command: append([]string(nil), h.Exec.Command...)}}
	}
	return out
}

func fromScheme(s probe.Scheme) probev1.Scheme {
	switch s {
	case probe.SchemeHTTP:
		return probev1.Scheme_SCHEME_HTTP
	case probe.SchemeHTTPS:
		return probev1.Scheme_SCHEME_HTTPS
	default:
		return probev1.Scheme_SCHEME_UNSPECIFIED
	}
}

func fromTLS(t *probe.TLS) *probev1.TLSConfig {
	if t == nil {
		return nil
	}
	return &probev1.TLSConfig{CaPem: t.CAPEM, InsecureSkipVerify: t.InsecureSkipVerify, ServerName: t.ServerName}
}

func fromStatus(a *arena, s *engine.Status, spec *target.Spec) *probev1.TargetStatus {
	out := a.status()
	*out = probev1.TargetStatus{
		Phase:      toAPI(phases, s.Phase),
		Started:    s.Started(),
		Ready:      s.Ready(),
		Live:       s.Live(),
		Startup:    fromProbeStatus(a, &s.Probes[probe.Startup], spec.StartupProbe),
		Liveness:   fromProbeStatus(a, &s.Probes[probe.Liveness], spec.LivenessProbe),
		Readiness:  fromProbeStatus(a, &s.Probes[probe.Readiness], spec.ReadinessProbe),
		Revision:   s.Revision,
		CreateTime: timestamp(a, s.CreateTime),
		StartTime:  timestamp(a, s.StartTime),
		DeleteTime: timestamp(a, s.DeleteTime),
	}
	return out
}

// fromProbeStatus converts the status of a probe; the effective timing is
// the engine's (with the server's floors applied), or computed from the
// spec for a status that does not carry it.
func fromProbeStatus(a *arena, p *engine.ProbeStatus, spec *probe.Spec) *probev1.ProbeStatus {
	if !p.Present || spec == nil {
		return nil
	}
	out := a.probeStatus()
	*out = probev1.ProbeStatus{
		Result:               toAPI(results, p.Result),
		Effective:            effectives.of(effective(p, spec)),
		ConsecutiveSuccesses: p.ConsecutiveSuccesses,
		ConsecutiveFailures:  p.ConsecutiveFailures,
		HasInitialized:       p.HasInitialized,
		LastProbeTime:        timestamp(a, p.LastProbeTime),
		LastTransitionTime:   timestamp(a, p.LastTransitionTime),
		LastMessage:          p.LastMessage, // bounded by the engine
		LastLatency:          duration(a, p.LastLatency),
		ProbesTotal:          p.ProbesTotal,
	}
	return out
}

// effective is the timing the engine uses: the status's, which has the
// server's floors applied, or else the spec's.
func effective(p *engine.ProbeStatus, spec *probe.Spec) probe.Effective {
	if p.Effective != (probe.Effective{}) {
		return p.Effective
	}
	return spec.Effective()
}

// effectives shares the API form of effective timings among the targets
// that have the same: a server returns few distinct ones (one per timing
// of the specs, with the server's floors), and converting one is five
// messages.
var effectives = sharedEffectives{m: make(map[probe.Effective]*probev1.Effective)}

// maxSharedEffectives bounds the timings sharedEffectives keeps; beyond
// it, a conversion makes its own message.
const maxSharedEffectives = 4096

// sharedEffectives maps effective timings to shared, never modified
// messages. Responses that hold one may be encoded at once: protobuf-go
// only reads a message to encode it, but for its size cache, which it
// writes atomically.
type sharedEffectives struct {
	mu sync.RWMutex
	m  map[probe.Effective]*probev1.Effective // guarded by mu
}

// of returns the message of e, shared when it can be.
func (s *sharedEffectives) of(e probe.Effective) *probev1.Effective {
	s.mu.RLock()
	m, ok := s.m[e]
	s.mu.RUnlock()
	if ok {
		return m
	}
	m = fromEffective(e)
	s.mu.Lock()
	defer s.mu.Unlock()
	if shared, ok := s.m[e]; ok {
		return shared
	}
	if len(s.m) < maxSharedEffectives {
		s.m[e] = m
	}
	return m
}

func fromEffective(e probe.Effective) *probev1.Effective {
	return &probev1.Effective{
		InitialDelay:                   durationpb.New(e.InitialDelay),
		Period:                         durationpb.New(e.Period),
		Timeout:                        durationpb.New(e.Timeout),
		InitialPeriod:                  durationpb.New(e.InitialPeriod),
		SuccessThreshold:               e.SuccessThreshold,
		FailureThreshold:               e.FailureThreshold,
		InitializationFailureThreshold: e.InitializationFailureThreshold,
	}
}

func fromEvent(ev *engine.Event) *probev1.Event {
	out := &probev1.Event{
		Revision: ev.Revision,
		Time:     timestamp(nil, ev.Time),
		Name:     ev.Name,
		Kind:     toAPI(eventKinds, ev.Kind),
		Message:  ev.Message, // bounded by the engine, and by the store's codec when loaded
		Reason:   ev.Reason,
		Started:  ev.Started,
		Ready:    ev.Ready,
		Live:     ev.Live,
	}
	if ev.Kind == engine.KindTransition || ev.Kind == engine.KindInitialized {
		out.ProbeType = toAPI(probeTypes, ev.Probe)
		out.From = toAPI(results, ev.From)
		out.To = toAPI(results, ev.To)
		out.Consecutive = ev.Consecutive
		out.Latency = duration(nil, ev.Latency)
	}
	if ev.Target != nil {
		out.Target = fromTarget(nil, ev.Target)
	}
	return out
}

func fromOutcome(o probe.Outcome, at time.Time) *probev1.Outcome {
	return &probev1.Outcome{Result: toAPI(results, o.Result), Message: o.Message, Latency: duration(nil, o.Latency), Time: timestamp(nil, at)}
}

// timestamp is t as the API's message (from a), nil for the zero time.
func timestamp(a *arena, t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	out := a.time()
	out.Seconds, out.Nanos = t.Unix(), int32(t.Nanosecond())
	return out
}

// duration is d as the API's message (from a), nil for 0.
func duration(a *arena, d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	out := a.duration()
	out.Seconds, out.Nanos = int64(d/time.Second), int32(d%time.Second)
	return out
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// listPage returns the targets of the ListTargets page o selects,
// converted as target converts each, and whether more follow: the engine
// lends each target in turn (ListEach) instead of making a Target of each.
func (s *Server) listPage(ctx context.Context, o engine.ListOptions) ([]*probev1.Target, bool, error) {
	out := make([]*probev1.Target, 0, o.Limit)
	a := newArena(o.Limit)
	more, err := s.engine.ListEach(ctx, o, func(t *engine.Target) { out = append(out, s.target(a, t)) })
	return out, more, err
}

// listOptions are the engine's options of a ListTargets page; the API
// has no recent runs (Recent) to fill.
func listOptions(after string, limit int, selector map[string]string) engine.ListOptions {
	return engine.ListOptions{After: after, Limit: limit, Selector: selector, WithoutRecent: true}
}
