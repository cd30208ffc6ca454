package xds

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
)

// The labels that make a target an endpoint of a service.
const (
	// LabelService names the service a target is an endpoint of: a target
	// NAMESPACE/NAME labelled probed.io/service=SERVICE is an endpoint of
	// SERVICE.NAMESPACE (a target without a namespace, of SERVICE). The
	// value is a DNS-1123 label.
	LabelService = "probed.io/service"
	// LabelServingPort, when set, is the port traffic goes to (1 to
	// 65535), on the host of the readiness probe; without it, the
	// readiness probe's port.
	LabelServingPort = "probed.io/serving-port"
)

// Why a target that names a service is not one of its endpoints.
const (
	ReasonBadService    = "bad-service-label"            // the label is not a DNS-1123 label
	ReasonBadPort       = "bad-serving-port"             // the serving-port label is not a port
	ReasonNoReadiness   = "no-readiness-probe"           // no probe says where the target listens
	ReasonExecReadiness = "exec-readiness-probe"         // an exec probe has no address
	ReasonHostNotAnIP   = "host-not-an-ip"               // Envoy and gRPC take IP addresses only
	ReasonUnspecifiedIP = "host-unspecified"             // 0.0.0.0 or :: is nowhere to send traffic
	ReasonNoHost        = "readiness-probe-without-host" // the probe has an empty host
)

var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// member is what the xDS model keeps of one target.
type member struct {
	// service is the service the target names ("" when none); set even
	// when the target is left out (reason), so that the service exists.
	service string
	// addr is where traffic goes; valid only when reason is "".
	addr netip.AddrPort
	// reason says why the target is not an endpoint of its service ("":
	// it is one).
	reason string
	ready  bool
	// terminating: deleted, in its grace period.
	terminating bool
}

// ServiceName returns the service a target named name with these labels
// belongs to ("" when none): SERVICE.NAMESPACE, or SERVICE for a name
// without a namespace. ok is false when the label is set but is not a
// DNS-1123 label.
func ServiceName(name string, labels map[string]string) (service string, ok bool) {
	svc, set := labels[LabelService]
	if !set {
		return "", true
	}
	if !dns1123Label.MatchString(svc) {
		return "", false
	}
	if ns, _, namespaced := strings.Cut(name, "/"); namespaced {
		return svc + "." + ns, true
	}
	return svc, true
}

// memberOf derives the member of t.
func memberOf(t *engine.Target) member {
	spec := t.Spec
	m := member{ready: t.Status.Ready(), terminating: t.Status.Phase == engine.Terminating}
	svc, ok := ServiceName(spec.Name, spec.Labels)
	if !ok {
		// The target means to be an endpoint but its service cannot be
		// named: it is left out of every service.
		m.reason = ReasonBadService
		return m
	}
	m.service = svc
	if svc == "" {
		return m
	}
	m.addr, m.reason = endpointOf(spec.ReadinessProbe, spec.Labels)
	return m
}

// endpointOf returns where traffic to a target goes: the host of its
// readiness probe and the serving port (or the probe's port), or why it
// has no such address.
func endpointOf(p *probe.Spec, labels map[string]string) (netip.AddrPort, string) {
	if p == nil {
		return netip.AddrPort{}, ReasonNoReadiness
	}
	var host string
	var port int32
	switch h := p.Handler; {
	case h.HTTPGet != nil:
		host, port = h.HTTPGet.Host, h.HTTPGet.Port
	case h.TCPSocket != nil:
		host, port = h.TCPSocket.Host, h.TCPSocket.Port
	case h.GRPC != nil:
		host, port = h.GRPC.Host, h.GRPC.Port
	case h.Exec != nil:
		return netip.AddrPort{}, ReasonExecReadiness
	default:
		return netip.AddrPort{}, ReasonNoReadiness
	}
	if servingPort, set := labels[LabelServingPort]; set {
		n, err := strconv.ParseUint(servingPort, 10, 16)
		if err != nil || n == 0 {
			return netip.AddrPort{}, ReasonBadPort
		}
		port = int32(n)
	}
	if host == "" {
		return netip.AddrPort{}, ReasonNoHost
	}
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	switch {
	case err != nil || ip.Zone() != "":
		return netip.AddrPort{}, ReasonHostNotAnIP
	case ip.IsUnspecified():
		return netip.AddrPort{}, ReasonUnspecifiedIP
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(port)), ""
}
