package check

import (
	"context"
	"net"
	"net/http"
	"slices"
)

// The defaults New applies to zero Options fields.
const (
	DefaultUserAgent    = "probed/dev"
	DefaultMaxBodyBytes = 10 << 10 // kubelet's 10 KiB
	// DefaultMaxHeaderBytes bounds an HTTP response's status line and
	// header, and a gRPC response's header list: twice what nginx
	// accepts from an upstream by default, far more than any health
	// endpoint sends.
	DefaultMaxHeaderBytes = 16 << 10
)

// Options configure a Set. The zero value is usable: HTTP, TCP and gRPC
// probes to any address, exec probes refused.
type Options struct {
	// UserAgent is sent by HTTP probes that do not set User-Agent
	// themselves, and prefixes gRPC's user agent. Default DefaultUserAgent.
	UserAgent string

	// AllowExec allows exec probes (--allow-exec). Exec probes run commands
	// on the probe host with probed's privileges.
	AllowExec bool
	// ExecAllowlist, when non-empty, lists the only commands (exact
	// Command[0] strings) exec probes may run.
	ExecAllowlist []string

	// Policy restricts the addresses network probes may connect to; nil
	// allows every address. See Policy.
	Policy *Policy

	// MaxBodyBytes caps how much of an HTTP response body is read (and
	// compared with ExpectedBody); the rest is ignored. Default
	// DefaultMaxBodyBytes.
	MaxBodyBytes int

	// MaxHeaderBytes caps the status line and header of an HTTP response
	// (beyond it the probe fails) and the header list a gRPC health
	// server may send. Default DefaultMaxHeaderBytes.
	MaxHeaderBytes int

	// GRPCDialPerProbe makes each gRPC check dial a channel of its own
	// and close it when it returns, as kubelet does: nothing is held
	// between checks, at the cost of a TCP (and TLS) handshake and an
	// HTTP/2 preface per check. By default (false) the checkers of a Set
	// that probe the same address with the same TLS settings share one
	// channel, kept while any of them is open.
	GRPCDialPerProbe bool

	// Inject, when set, is called with each HTTP probe's context and
	// request headers just before the request is sent, for example to
	// propagate a W3C traceparent/tracestate from the context (an
	// OpenTelemetry propagator's Inject fits: pass
	// func(ctx, h) { prop.Inject(ctx, propagation.HeaderCarrier(h)) }).
	// It may be called concurrently for different probes.
	Inject func(ctx context.Context, h http.Header)

	// dialers are what every checker of a Set connects with: [false] keeps
	// its connections, [true] sets SO_LINGER (see newDialer). Built by
	// withDefaults.
	dialers [2]*net.Dialer
}

// dialer returns the Set's dialer, with SO_LINGER when linger.
func (o *Options) dialer(linger bool) *net.Dialer {
	if linger {
		return o.dialers[1]
	}
	return o.dialers[0]
}

// withDefaults returns o with zero fields defaulted and slices copied, so
// the caller may reuse its Options.
func (o Options) withDefaults() Options {
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	o.ExecAllowlist = slices.Clone(o.ExecAllowlist)
	o.dialers = [2]*net.Dialer{newDialer(o.Policy, false), newDialer(o.Policy, true)}
	return o
}
