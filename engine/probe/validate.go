package probe

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/probed/probed/engine/feature"
	"github.com/probed/probed/engine/field"
)

// DefaultMinPeriod and DefaultMinTimeout are the floors KEP-3066 proposes
// for the effective period and timeout; the server's --min-period and
// --min-timeout change them.
const (
	DefaultMinPeriod  = 100 * time.Millisecond
	DefaultMinTimeout = 100 * time.Millisecond
)

// Limits on request sizes that keep one target from costing the engine
// much; see SECURITY.md.
const (
	MaxHeaders      = 32
	MaxHeaderBytes  = 4096 // name + value of one header
	MaxPathBytes    = 2048
	MaxHostBytes    = 253
	MaxBodyBytes    = 10 << 10 // expectedBody; the checker reads at most this much
	MaxCommandArgs  = 64
	MaxCommandBytes = 8192
	MaxCAPEMBytes   = 64 << 10
	MaxServiceBytes = 1024 // a gRPC health service name
)

// Options are the server-wide settings validation depends on.
type Options struct {
	MinPeriod  time.Duration
	MinTimeout time.Duration
	// SubSecondProbes allows the *Milliseconds fields: the feature gate, or
	// ratcheting (the stored object already uses them).
	SubSecondProbes bool
	// AllowExec allows exec handlers (--allow-exec).
	AllowExec bool
}

// JSON names of the probe fields, used in field paths.
const (
	fieldInitialDelaySeconds      = "initialDelaySeconds"
	fieldTimeoutSeconds           = "timeoutSeconds"
	fieldPeriodSeconds            = "periodSeconds"
	fieldSuccessThreshold         = "successThreshold"
	fieldFailureThreshold         = "failureThreshold"
	fieldInitialDelayMilliseconds = "initialDelayMilliseconds"
	fieldTimeoutMilliseconds      = "timeoutMilliseconds"
	fieldPeriodMilliseconds       = "periodMilliseconds"
	fieldInitFailureThreshold     = "initializationFailureThreshold"
	fieldInitialPeriodSeconds     = "initialPeriodSeconds"
	fieldInitialPeriodMillis      = "initialPeriodMilliseconds"
)

// Validate reports every problem with a probe of type typ at path, all at
// once. It checks the spec as written (non-negative seconds and thresholds,
// milliseconds strictly between -1000 and 1000, the SubSecondProbes gate),
// then the effective values (period and timeout at least the floors,
// initial delay not negative, successThreshold 1 for liveness and startup)
// and the handler.
func (s *Spec) Validate(typ Type, path *field.Path, opts Options) field.List {
	var errs field.List
	errs = append(errs, s.Handler.validate(path, opts)...)

	bad := make(map[string]bool) // fields whose own value is invalid
	for _, f := range []struct {
		name  string
		value int32
	}{
		{fieldInitialDelaySeconds, s.InitialDelaySeconds},
		{fieldTimeoutSeconds, s.TimeoutSeconds},
		{fieldPeriodSeconds, s.PeriodSeconds},
		{fieldSuccessThreshold, s.SuccessThreshold},
		{fieldFailureThreshold, s.FailureThreshold},
		{fieldInitFailureThreshold, deref(s.InitializationFailureThreshold)},
		{fieldInitialPeriodSeconds, deref(s.InitialPeriodSeconds)},
	} {
		if f.value < 0 {
			bad[f.name] = true
			errs = append(errs, field.Invalid(path.Child(f.name), f.value, "must be greater than or equal to 0"))
		}
	}

	millis := []struct {
		name  string
		value *int32
	}{
		{fieldInitialDelayMilliseconds, s.InitialDelayMilliseconds},
		{fieldTimeoutMilliseconds, s.TimeoutMilliseconds},
		{fieldPeriodMilliseconds, s.PeriodMilliseconds},
		{fieldInitialPeriodMillis, s.InitialPeriodMilliseconds},
	}
	for _, f := range millis {
		switch {
		case f.value == nil:
		case !opts.SubSecondProbes:
			bad[f.name] = true
			errs = append(errs, field.Forbidden(path.Child(f.name),
				fmt.Sprintf("disabled by the %s feature gate; remove the field or start probed with --feature-gates=%s=true",
					feature.SubSecondProbes, feature.SubSecondProbes)))
		case *f.value <= -1000 || *f.value >= 1000:
			bad[f.name] = true
			errs = append(errs, field.Invalid(path.Child(f.name), *f.value, "must be greater than -1000 and less than 1000"))
		}
	}

	// The effective values, each checked only when its parts are valid (a
	// sum of invalid parts means nothing).
	eff := s.Effective()
	valid := func(seconds, millis string) bool { return !bad[seconds] && !bad[millis] }
	if valid(fieldInitialDelaySeconds, fieldInitialDelayMilliseconds) && eff.InitialDelay < 0 {
		errs = append(errs, field.Invalid(s.pick(path, fieldInitialDelaySeconds, fieldInitialDelayMilliseconds, s.InitialDelayMilliseconds),
			pickValue(s.InitialDelaySeconds, s.InitialDelayMilliseconds),
			fmt.Sprintf("effective initial delay %s + %s = %v must not be negative",
				describe(fieldInitialDelaySeconds, s.InitialDelaySeconds, false), describeMillis(fieldInitialDelayMilliseconds, s.InitialDelayMilliseconds), eff.InitialDelay)))
	}
	if valid(fieldPeriodSeconds, fieldPeriodMilliseconds) && eff.Period < opts.MinPeriod {
		errs = append(errs, field.Invalid(s.pick(path, fieldPeriodSeconds, fieldPeriodMilliseconds, s.PeriodMilliseconds),
			pickValue(s.PeriodSeconds, s.PeriodMilliseconds),
			fmt.Sprintf("effective period %s + %s = %v must be at least %v (the server's --min-period)",
				describe(fieldPeriodSeconds, s.PeriodSeconds, true), describeMillis(fieldPeriodMilliseconds, s.PeriodMilliseconds), eff.Period, opts.MinPeriod)))
	}
	if valid(fieldTimeoutSeconds, fieldTimeoutMilliseconds) && eff.Timeout < opts.MinTimeout {
		errs = append(errs, field.Invalid(s.pick(path, fieldTimeoutSeconds, fieldTimeoutMilliseconds, s.TimeoutMilliseconds),
			pickValue(s.TimeoutSeconds, s.TimeoutMilliseconds),
			fmt.Sprintf("effective timeout %s + %s = %v must be at least %v (the server's --min-timeout)",
				describe(fieldTimeoutSeconds, s.TimeoutSeconds, true), describeMillis(fieldTimeoutMilliseconds, s.TimeoutMilliseconds), eff.Timeout, opts.MinTimeout)))
	}
	if (s.InitialPeriodSeconds != nil || s.InitialPeriodMilliseconds != nil) && valid(fieldInitialPeriodSeconds, fieldInitialPeriodMillis) && eff.InitialPeriod < opts.MinPeriod {
		errs = append(errs, field.Invalid(s.pick(path, fieldInitialPeriodSeconds, fieldInitialPeriodMillis, s.InitialPeriodMilliseconds),
			pickValue(deref(s.InitialPeriodSeconds), s.InitialPeriodMilliseconds),
			fmt.Sprintf("effective initial period %s + %s = %v must be at least %v (the server's --min-period)",
				describe(fieldInitialPeriodSeconds, deref(s.InitialPeriodSeconds), false), describeMillis(fieldInitialPeriodMillis, s.InitialPeriodMilliseconds), eff.InitialPeriod, opts.MinPeriod)))
	}
	if !bad[fieldSuccessThreshold] && typ != Readiness && eff.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(path.Child(fieldSuccessThreshold), s.SuccessThreshold,
			fmt.Sprintf("must be 1 for %s probes", typ)))
	}
	return errs
}

// pick returns the path of the milliseconds field when it is set (that is
// what the user most likely got wrong), else the seconds field.
func (s *Spec) pick(path *field.Path, seconds, millis string, ms *int32) *field.Path {
	if ms != nil {
		return path.Child(millis)
	}
	return path.Child(seconds)
}

func pickValue(seconds int32, ms *int32) int32 {
	if ms != nil {
		return *ms
	}
	return seconds
}

// describe renders "periodSeconds 0 (defaulted to 10s)" or "periodSeconds 2".
func describe(name string, v int32, defaults bool) string {
	if defaults && v == 0 {
		def := DefaultPeriodSeconds
		if name == fieldTimeoutSeconds {
			def = DefaultTimeoutSeconds
		}
		return fmt.Sprintf("%s 0 (defaulted to %ds)", name, def)
	}
	return fmt.Sprintf("%s %d", name, v)
}

func describeMillis(name string, v *int32) string {
	if v == nil {
		return name + " unset"
	}
	return fmt.Sprintf("%s %d", name, *v)
}

func (h *Handler) validate(path *field.Path, opts Options) field.List {
	var errs field.List
	n := 0
	for _, set := range []struct {
		name string
		on   bool
	}{{"httpGet", h.HTTPGet != nil}, {"tcpSocket", h.TCPSocket != nil}, {"grpc", h.GRPC != nil}, {"exec", h.Exec != nil}} {
		if !set.on {
			continue
		}
		n++
		if n > 1 {
			errs = append(errs, field.Forbidden(path.Child(set.name), "may not specify more than 1 handler type"))
		}
	}
	if n == 0 {
		return append(errs, field.Required(path, "must specify a handler type: httpGet, tcpSocket, grpc or exec"))
	}
	switch {
	case h.HTTPGet != nil:
		errs = append(errs, h.HTTPGet.validate(path.Child("httpGet"))...)
	case h.TCPSocket != nil:
		p := path.Child("tcpSocket")
		errs = append(errs, validateHost(p.Child("host"), h.TCPSocket.Host)...)
		errs = append(errs, validatePort(p.Child("port"), h.TCPSocket.Port)...)
	case h.GRPC != nil:
		p := path.Child("grpc")
		errs = append(errs, validateHost(p.Child("host"), h.GRPC.Host)...)
		errs = append(errs, validatePort(p.Child("port"), h.GRPC.Port)...)
		if h.GRPC.Service != nil && len(*h.GRPC.Service) > MaxServiceBytes {
			errs = append(errs, field.TooLong(p.Child("service"), MaxServiceBytes))
		}
		errs = append(errs, h.GRPC.TLS.validate(p.Child("tls"))...)
	case h.Exec != nil:
		errs = append(errs, h.Exec.validate(path.Child("exec"), opts)...)
	}
	return errs
}

func (g *HTTPGet) validate(path *field.Path) field.List {
	var errs field.List
	errs = append(errs, validateHost(path.Child("host"), g.Host)...)
	errs = append(errs, validatePort(path.Child("port"), g.Port)...)
	errs = append(errs, validatePath(path.Child("path"), g.Path)...)
	switch g.Scheme {
	case "", SchemeHTTP:
		if g.TLS != nil {
			errs = append(errs, field.Forbidden(path.Child("tls"), "may only be set with scheme HTTPS"))
		}
	case SchemeHTTPS:
		errs = append(errs, g.TLS.validate(path.Child("tls"))...)
	default:
		errs = append(errs, field.Invalid(path.Child("scheme"), string(g.Scheme), "must be HTTP or HTTPS"))
	}
	if len(g.Headers) > MaxHeaders {
		errs = append(errs, field.Invalid(path.Child("httpHeaders"), len(g.Headers), fmt.Sprintf("must have at most %d headers", MaxHeaders)))
	}
	for i, h := range g.Headers {
		p := path.Child("httpHeaders").Index(i)
		switch {
		case h.Name == "":
			errs = append(errs, field.Required(p.Child("name"), "a header name is required"))
		case !validHeaderName(h.Name):
			errs = append(errs, field.Invalid(p.Child("name"), h.Name, "must be a valid HTTP header name (RFC 7230 token)"))
		}
		if strings.ContainsFunc(h.Value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			errs = append(errs, field.Invalid(p.Child("value"), h.Value, "must not contain CR, LF, NUL or other control characters but tab"))
		}
		if len(h.Name)+len(h.Value) > MaxHeaderBytes {
			errs = append(errs, field.TooLong(p, MaxHeaderBytes))
		}
	}
	if len(g.ExpectedBody) > MaxBodyBytes {
		errs = append(errs, field.TooLong(path.Child("expectedBody"), MaxBodyBytes))
	}
	return errs
}

func validHeaderName(name string) bool {
	return http.CanonicalHeaderKey(name) != "" && !strings.ContainsFunc(name, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
	})
}

func (t *TLS) validate(path *field.Path) field.List {
	if t == nil {
		return nil
	}
	var errs field.List
	if t.ServerName != "" {
		p := path.Child("serverName")
		if len(t.ServerName) > MaxHostBytes {
			errs = append(errs, field.TooLong(p, MaxHostBytes))
		} else if _, err := netip.ParseAddr(t.ServerName); err != nil && !validHostName(t.ServerName) {
			errs = append(errs, field.Invalid(p, t.ServerName, "must be a host name or an IP address"))
		}
	}
	switch {
	case t.CAPEM == "":
	case len(t.CAPEM) > MaxCAPEMBytes:
		errs = append(errs, field.TooLong(path.Child("caPem"), MaxCAPEMBytes))
	case !x509.NewCertPool().AppendCertsFromPEM([]byte(t.CAPEM)):
		errs = append(errs, field.Invalid(path.Child("caPem"), "<PEM>", "must contain at least one PEM-encoded certificate"))
	}
	return errs
}

func (e *Exec) validate(path *field.Path, opts Options) field.List {
	if !opts.AllowExec {
		return field.List{field.Forbidden(path, "exec probes are disabled on this server (they run commands on the probe host); start probed with --allow-exec to allow them")}
	}
	var errs field.List
	if len(e.Command) == 0 || e.Command[0] == "" {
		errs = append(errs, field.Required(path.Child("command"), "a command is required"))
	}
	if len(e.Command) > MaxCommandArgs {
		errs = append(errs, field.Invalid(path.Child("command"), len(e.Command), fmt.Sprintf("must have at most %d arguments", MaxCommandArgs)))
	}
	total := 0
	for i, a := range e.Command {
		total += len(a)
		if strings.ContainsRune(a, 0) {
			errs = append(errs, field.Invalid(path.Child("command").Index(i), a, "must not contain NUL (no program could receive it)"))
		}
	}
	if total > MaxCommandBytes {
		errs = append(errs, field.TooLong(path.Child("command"), MaxCommandBytes))
	}
	return errs
}

// validateHost accepts what a probe can connect to: an IP address (IPv6
// without brackets, with an optional zone) other than an unspecified one,
// or a host name as Go's resolver accepts it. Anything else would fail on
// every probe.
func validateHost(path *field.Path, host string) field.List {
	switch {
	case host == "":
		return field.List{field.Required(path, "a host name or IP address is required")}
	case len(host) > MaxHostBytes:
		return field.List{field.TooLong(path, MaxHostBytes)}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Unmap().WithZone("").IsUnspecified() {
			return field.List{field.Invalid(path, host, "must not be an unspecified address (0.0.0.0, ::): it means this host, never a probe target; use 127.0.0.1 or ::1 for a local server")}
		}
		if z := ip.Zone(); strings.ContainsFunc(z, func(r rune) bool { return !isNameByte(r) }) {
			return field.List{field.Invalid(path, host, "the zone of an IPv6 address must be an interface name or index (letters, digits, '-', '_' and '.')")}
		}
		return nil
	}
	if !validHostName(host) {
		return field.List{field.Invalid(path, host, "must be a host name or IP address (IPv6 without brackets, a zone after '%' not empty), "+
			"without scheme, port or path; a name is dot-separated labels of letters, digits, '-' and '_', at most 63 bytes each, not all digits")}
	}
	return nil
}

// validHostName reports whether s is a name Go's resolver looks up (its
// isDomainName): dot-separated labels of letters, digits, '_' and '-'
// (not at either end of a label), 1 to 63 bytes each, an optional final
// dot, and not all digits (which a C resolver would read as an address).
func validHostName(s string) bool {
	if s == "" || s == "." || len(s) > MaxHostBytes+1 {
		return false
	}
	last, label, nonNumeric := byte('.'), 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', c == '_':
			nonNumeric = true
			label++
		case '0' <= c && c <= '9':
			label++
		case c == '-':
			if last == '.' {
				return false
			}
			nonNumeric = true
			label++
		case c == '.':
			if last == '.' || last == '-' {
				return false
			}
			label = 0
		default:
			return false
		}
		if label > 63 {
			return false
		}
		last = c
	}
	return last != '-' && nonNumeric
}

func isNameByte(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.'
}

// validatePath accepts a path (with an optional query) that makes a valid
// request line: it starts with "/", and has no control character nor a
// malformed %-escape.
func validatePath(path *field.Path, p string) field.List {
	switch {
	case p == "":
		return nil
	case len(p) > MaxPathBytes:
		return field.List{field.TooLong(path, MaxPathBytes)}
	case !strings.HasPrefix(p, "/"):
		return field.List{field.Invalid(path, p, `must start with "/"`)}
	}
	if _, err := url.ParseRequestURI(p); err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the path, which the error shows already
		}
		return field.List{field.Invalid(path, p, "must be a valid URL path and query: "+err.Error())}
	}
	return nil
}

// validatePort reports a port of 0 (proto3's "not set") as missing.
func validatePort(path *field.Path, port int32) field.List {
	if port == 0 {
		return field.List{field.Required(path, "a port between 1 and 65535 is required")}
	}
	if port < 1 || port > 65535 {
		return field.List{field.Invalid(path, port, "must be between 1 and 65535, inclusive")}
	}
	return nil
}
