package codec

import (
	"fmt"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	storagev1 "github.com/probed/probed/proto/probed/storage/v1"
)

// MarshalSpec returns the stored form of s.
func MarshalSpec(s *target.Spec) ([]byte, error) {
	m, err := specToProto(s)
	if err != nil {
		return nil, err
	}
	return marshal(m)
}

// UnmarshalSpec decodes a value of MarshalSpec into s.
func UnmarshalSpec(b []byte, s *target.Spec) error {
	var m storagev1.Spec
	if err := unmarshal(b, &m); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	return specFromProto(&m, s, "")
}

func specToProto(s *target.Spec) (*storagev1.Spec, error) {
	m := &storagev1.Spec{
		Name:                          &s.Name,
		Labels:                        labelsToProto(s.Labels),
		TerminationGracePeriodSeconds: s.TerminationGracePeriodSeconds,
	}
	probes := [...]**storagev1.Probe{&m.StartupProbe, &m.LivenessProbe, &m.ReadinessProbe}
	for i, p := range probes {
		typ := probe.Types[i]
		var err error
		if *p, err = probeToProto(s.Probe(typ), typ.Field()); err != nil {
			return nil, err
		}
	}
	if l := s.Lifecycle; l != nil {
		m.Lifecycle = &storagev1.Lifecycle{}
		if h := l.PreStop; h != nil {
			m.Lifecycle.PreStop = &storagev1.LifecycleHandler{}
			if sl := h.Sleep; sl != nil {
				m.Lifecycle.PreStop.Sleep = &storagev1.SleepAction{Seconds: sl.Seconds}
			}
		}
	}
	return m, nil
}

// specFromProto decodes m into s; an absent name is name.
func specFromProto(m *storagev1.Spec, s *target.Spec, name string) error {
	if err := known(m, "spec"); err != nil {
		return err
	}
	labels, err := labelsFromProto(m.Labels, "spec.labels")
	if err != nil {
		return err
	}
	*s = target.Spec{
		Name:                          name,
		Labels:                        labels,
		TerminationGracePeriodSeconds: m.TerminationGracePeriodSeconds,
	}
	if m.Name != nil {
		s.Name = *m.Name
	}
	probes := [...]*storagev1.Probe{m.StartupProbe, m.LivenessProbe, m.ReadinessProbe}
	dsts := [...]**probe.Spec{&s.StartupProbe, &s.LivenessProbe, &s.ReadinessProbe}
	for i, p := range probes {
		var err error
		if *dsts[i], err = probeFromProto(p, &probePaths[i]); err != nil {
			return err
		}
	}
	if l := m.Lifecycle; l != nil {
		if err := known(l, "spec.lifecycle"); err != nil {
			return err
		}
		s.Lifecycle = &target.Lifecycle{}
		if h := l.PreStop; h != nil {
			if err := known(h, "spec.lifecycle.preStop"); err != nil {
				return err
			}
			s.Lifecycle.PreStop = &target.Handler{}
			if sl := h.Sleep; sl != nil {
				if err := known(sl, "spec.lifecycle.preStop.sleep"); err != nil {
					return err
				}
				s.Lifecycle.PreStop.Sleep = &target.SleepAction{Seconds: sl.Seconds}
			}
		}
	}
	return nil
}

func probeToProto(p *probe.Spec, what string) (*storagev1.Probe, error) {
	if p == nil {
		return nil, nil
	}
	m := &storagev1.Probe{
		InitialDelaySeconds:            p.InitialDelaySeconds,
		TimeoutSeconds:                 p.TimeoutSeconds,
		PeriodSeconds:                  p.PeriodSeconds,
		SuccessThreshold:               p.SuccessThreshold,
		FailureThreshold:               p.FailureThreshold,
		InitialDelayMilliseconds:       p.InitialDelayMilliseconds,
		TimeoutMilliseconds:            p.TimeoutMilliseconds,
		PeriodMilliseconds:             p.PeriodMilliseconds,
		InitializationFailureThreshold: p.InitializationFailureThreshold,
		InitialPeriodSeconds:           p.InitialPeriodSeconds,
		InitialPeriodMilliseconds:      p.InitialPeriodMilliseconds,
	}
	h := &p.Handler
	if g := h.HTTPGet; g != nil {
		scheme, err := schemeToProto(g.Scheme)
		if err != nil {
			return nil, fmt.Errorf("spec.%s.httpGet.scheme: %w", what, err)
		}
		m.HttpGet = &storagev1.HTTPGetAction{
			Host: g.Host, Port: g.Port, Path: g.Path, Scheme: scheme,
			ExpectedBody: g.ExpectedBody, DisableKeepAlive: g.DisableKeepAlive, Tls: tlsToProto(g.TLS),
		}
		if len(g.Headers) > 0 {
			m.HttpGet.HttpHeaders = make([]*storagev1.HTTPHeader, len(g.Headers))
			for i, hd := range g.Headers {
				m.HttpGet.HttpHeaders[i] = &storagev1.HTTPHeader{Name: hd.Name, Value: hd.Value}
			}
		}
	}
	if t := h.TCPSocket; t != nil {
		m.TcpSocket = &storagev1.TCPSocketAction{Host: t.Host, Port: t.Port}
	}
	if g := h.GRPC; g != nil {
		m.Grpc = &storagev1.GRPCAction{Host: g.Host, Port: g.Port, Service: g.Service, Tls: tlsToProto(g.TLS)}
	}
	if e := h.Exec; e != nil {
		m.Exec = &storagev1.ExecAction{Command: e.Command}
	}
	return m, nil
}

// probePath names the messages of one probe in errors. They are built
// once: decoding must not pay for the names of errors it does not have.
type probePath struct {
	self, httpGet, httpGetScheme, httpGetTLS, httpHeaders, tcpSocket, grpc, grpcTLS, exec string
}

var probePaths = func() (ps [probe.NumTypes]probePath) {
	for i, t := range probe.Types {
		p := "spec." + t.Field()
		ps[i] = probePath{
			self: p, httpGet: p + ".httpGet", httpGetScheme: p + ".httpGet.scheme", httpGetTLS: p + ".httpGet.tls",
			httpHeaders: p + ".httpGet.httpHeaders", tcpSocket: p + ".tcpSocket", grpc: p + ".grpc", grpcTLS: p + ".grpc.tls",
			exec: p + ".exec",
		}
	}
	return ps
}()

func probeFromProto(m *storagev1.Probe, path *probePath) (*probe.Spec, error) {
	if m == nil {
		return nil, nil
	}
	if err := known(m, path.self); err != nil {
		return nil, err
	}
	p := &probe.Spec{
		InitialDelaySeconds:            m.InitialDelaySeconds,
		TimeoutSeconds:                 m.TimeoutSeconds,
		PeriodSeconds:                  m.PeriodSeconds,
		SuccessThreshold:               m.SuccessThreshold,
		FailureThreshold:               m.FailureThreshold,
		InitialDelayMilliseconds:       m.InitialDelayMilliseconds,
		TimeoutMilliseconds:            m.TimeoutMilliseconds,
		PeriodMilliseconds:             m.PeriodMilliseconds,
		InitializationFailureThreshold: m.InitializationFailureThreshold,
		InitialPeriodSeconds:           m.InitialPeriodSeconds,
		InitialPeriodMilliseconds:      m.InitialPeriodMilliseconds,
	}
	h := &p.Handler
	if g := m.HttpGet; g != nil {
		if err := known(g, path.httpGet); err != nil {
			return nil, err
		}
		scheme, err := schemeFromProto(g.Scheme)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path.httpGetScheme, err)
		}
		tls, err := tlsFromProto(g.Tls, path.httpGetTLS)
		if err != nil {
			return nil, err
		}
		h.HTTPGet = &probe.HTTPGet{
			Host: g.Host, Port: g.Port, Path: g.Path, Scheme: scheme,
			ExpectedBody: g.ExpectedBody, DisableKeepAlive: g.DisableKeepAlive, TLS: tls,
		}
		if len(g.HttpHeaders) > 0 {
			h.HTTPGet.Headers = make([]probe.Header, len(g.HttpHeaders))
			for i, hd := range g.HttpHeaders {
				if err := known(hd, path.httpHeaders); err != nil {
					return nil, err
				}
				h.HTTPGet.Headers[i] = probe.Header{Name: hd.Name, Value: hd.Value}
			}
		}
	}
	if t := m.TcpSocket; t != nil {
		if err := known(t, path.tcpSocket); err != nil {
			return nil, err
		}
		h.TCPSocket = &probe.TCPSocket{Host: t.Host, Port: t.Port}
	}
	if g := m.Grpc; g != nil {
		if err := known(g, path.grpc); err != nil {
			return nil, err
		}
		tls, err := tlsFromProto(g.Tls, path.grpcTLS)
		if err != nil {
			return nil, err
		}
		h.GRPC = &probe.GRPC{Host: g.Host, Port: g.Port, Service: g.Service, TLS: tls}
	}
	if e := m.Exec; e != nil {
		if err := known(e, path.exec); err != nil {
			return nil, err
		}
		h.Exec = &probe.Exec{Command: e.Command}
	}
	return p, nil
}

func tlsToProto(t *probe.TLS) *storagev1.TLSConfig {
	if t == nil {
		return nil
	}
	return &storagev1.TLSConfig{CaPem: t.CAPEM, InsecureSkipVerify: t.InsecureSkipVerify, ServerName: t.ServerName}
}

func tlsFromProto(m *storagev1.TLSConfig, what string) (*probe.TLS, error) {
	if m == nil {
		return nil, nil
	}
	if err := known(m, what); err != nil {
		return nil, err
	}
	return &probe.TLS{CAPEM: m.CaPem, InsecureSkipVerify: m.InsecureSkipVerify, ServerName: m.ServerName}, nil
}
