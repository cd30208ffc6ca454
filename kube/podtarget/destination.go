package podtarget

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// The rule "probes reach the pod only" is enforced on the probe as
// decoded, never on the annotation's text: protojson accepts several
// spellings of every field (its JSON name, its proto name, escaped keys),
// and only the decoded message says what probed will do.
//
// Every field of probe.v1.Probe, at any depth, has a rule in rules
// (TestEveryProbeFieldHasARule). A field without one is refused when a
// pod sets it: a field added to the API later reaches no pod until
// someone decides where it may point.

// ruleKind says what a field of a pod's probe may hold.
type ruleKind int

const (
	// forbidden: a pod may not set the field (also every field missing
	// from rules).
	forbidden ruleKind = iota
	// allowed: any value; a message's fields follow their own rules.
	allowed
	// podHost: the host a handler connects to. Empty or the pod's IP; it
	// is set to the pod's IP.
	podHost
	// podServerName: a name that replaces the host where the handler
	// names its destination (TLS SNI and verification, and the gRPC
	// :authority, which grpc-go takes from the TLS server name). Empty or
	// the pod's IP.
	podServerName
	// headerName: an HTTP request header's name. Not one that names
	// another destination (routingHeaders).
	headerName
)

// rule is a field's rule; detail explains a forbidden field.
type rule struct {
	kind   ruleKind
	detail string
}

// rules maps every field of probe.v1.Probe's tree to its rule.
var rules = map[protoreflect.FullName]rule{
	"probe.v1.Probe.http_get":                         {kind: allowed},
	"probe.v1.Probe.tcp_socket":                       {kind: allowed},
	"probe.v1.Probe.grpc":                             {kind: allowed},
	"probe.v1.Probe.exec":                             {kind: forbidden, detail: "exec probes would run on probed's host, not in the pod"},
	"probe.v1.Probe.initial_delay_seconds":            {kind: allowed},
	"probe.v1.Probe.timeout_seconds":                  {kind: allowed},
	"probe.v1.Probe.period_seconds":                   {kind: allowed},
	"probe.v1.Probe.success_threshold":                {kind: allowed},
	"probe.v1.Probe.failure_threshold":                {kind: allowed},
	"probe.v1.Probe.initial_delay_milliseconds":       {kind: allowed},
	"probe.v1.Probe.timeout_milliseconds":             {kind: allowed},
	"probe.v1.Probe.period_milliseconds":              {kind: allowed},
	"probe.v1.Probe.initialization_failure_threshold": {kind: allowed},
	"probe.v1.Probe.initial_period_seconds":           {kind: allowed},
	"probe.v1.Probe.initial_period_milliseconds":      {kind: allowed},

	"probe.v1.HTTPGetAction.host":               {kind: podHost},
	"probe.v1.HTTPGetAction.port":               {kind: allowed},
	"probe.v1.HTTPGetAction.path":               {kind: allowed}, // only its path and query are used
	"probe.v1.HTTPGetAction.scheme":             {kind: allowed},
	"probe.v1.HTTPGetAction.http_headers":       {kind: allowed},
	"probe.v1.HTTPGetAction.expected_body":      {kind: allowed},
	"probe.v1.HTTPGetAction.disable_keep_alive": {kind: allowed},
	"probe.v1.HTTPGetAction.tls":                {kind: allowed},
	"probe.v1.HTTPHeader.name":                  {kind: headerName},
	"probe.v1.HTTPHeader.value":                 {kind: allowed},

	"probe.v1.TLSConfig.ca_pem":               {kind: allowed},
	"probe.v1.TLSConfig.insecure_skip_verify": {kind: allowed},
	"probe.v1.TLSConfig.server_name":          {kind: podServerName},

	"probe.v1.TCPSocketAction.host": {kind: podHost},
	"probe.v1.TCPSocketAction.port": {kind: allowed},

	"probe.v1.GRPCAction.host":    {kind: podHost},
	"probe.v1.GRPCAction.port":    {kind: allowed},
	"probe.v1.GRPCAction.service": {kind: allowed}, // the name in the health request
	"probe.v1.GRPCAction.tls":     {kind: allowed},

	"probe.v1.ExecAction.command": {kind: forbidden, detail: "exec probes would run on probed's host, not in the pod"},
}

// routingHeaders are the request headers that name a destination other
// than the connection's: the Host (a virtual host, or a forward proxy's
// target) and those proxies route by. Compared in canonical form; a name
// starting with ':' (an HTTP/2 pseudo-header such as :authority) is
// refused too.
var routingHeaders = []string{
	"Host",
	"Forwarded",
	"X-Forwarded-Host",
	"X-Forwarded-Server",
	"X-Host",
	"X-Original-Host",
	"X-Original-Url",
	"X-Rewrite-Url",
}

// aim enforces the rules on p, a probe decoded from the annotation at
// path, and aims it at the pod: every host becomes ip. It returns the
// fields that break a rule.
func aim(p *probev1.Probe, ip, path string) []FieldError {
	return aimMessage(p.ProtoReflect(), ip, path)
}

func aimMessage(m protoreflect.Message, ip, path string) []FieldError {
	var errs []FieldError
	fds := m.Descriptor().Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		r := rules[fd.FullName()]
		fpath := path + "." + fd.JSONName()
		if r.kind == podHost {
			if m.Has(fd) && !isPod(m.Get(fd).String(), ip) {
				errs = append(errs, FieldError{Field: fpath, Detail: fmt.Sprintf("Forbidden: probes reach the pod only; leave the host out (it is the pod IP, %s)", ip)})
			}
			m.Set(fd, protoreflect.ValueOfString(ip))
			continue
		}
		if !m.Has(fd) {
			continue
		}
		switch r.kind {
		case forbidden:
			detail := r.detail
			if detail == "" {
				detail = "not allowed in a pod's probes"
			}
			errs = append(errs, FieldError{Field: fpath, Detail: "Forbidden: " + detail})
			continue
		case podServerName:
			if !isPod(m.Get(fd).String(), ip) {
				errs = append(errs, FieldError{Field: fpath, Detail: fmt.Sprintf("Forbidden: probes reach the pod only; leave the server name out or make it the pod IP, %s", ip)})
			}
		case headerName:
			if name := m.Get(fd).String(); routes(name) {
				errs = append(errs, FieldError{Field: fpath, Detail: fmt.Sprintf("Forbidden: %s: probes reach the pod only; no header may name another destination (%s)", quote(name), strings.Join(routingHeaders, ", "))})
			}
		}
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				errs = append(errs, FieldError{Field: fpath, Detail: "Forbidden: not allowed in a pod's probes"})
			}
		case fd.IsList() && fd.Message() != nil:
			l := m.Get(fd).List()
			for j := range l.Len() {
				errs = append(errs, aimMessage(l.Get(j).Message(), ip, fmt.Sprintf("%s[%d]", fpath, j))...)
			}
		case !fd.IsList() && fd.Message() != nil:
			errs = append(errs, aimMessage(m.Mutable(fd).Message(), ip, fpath)...)
		}
	}
	return errs
}

// isPod reports whether addr names the pod: empty (the pod is meant), or
// the pod's IP address (any spelling of the same address, without a
// zone).
func isPod(addr, ip string) bool {
	if addr == "" || addr == ip {
		return true
	}
	a, errA := netip.ParseAddr(addr)
	b, errB := netip.ParseAddr(ip)
	return errA == nil && errB == nil && a.Zone() == "" && a == b
}

// routes reports whether a header by name names a destination.
func routes(name string) bool {
	name = strings.TrimSpace(name)
	if strings.HasPrefix(name, ":") {
		return true
	}
	canon := http.CanonicalHeaderKey(name)
	for _, h := range routingHeaders {
		if strings.EqualFold(canon, h) {
			return true
		}
	}
	return false
}
