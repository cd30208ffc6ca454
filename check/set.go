// Package check implements the engine's probe checkers: HTTP(S) GET, TCP,
// gRPC health and exec, with kubelet's semantics and messages, plus what
// kubelet lacks: verified TLS, kept-alive connections, latency phases and
// a Policy on the addresses probes may reach.
package check

import (
	"errors"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
)

// The errors Open returns (wrapped) for a handler it refuses.
var (
	// ErrExecDisabled refuses exec probes when Options.AllowExec is false.
	ErrExecDisabled = errors.New("exec probes are disabled; start probed with --allow-exec")
	// ErrExecNotAllowed refuses an exec command missing from
	// Options.ExecAllowlist.
	ErrExecNotAllowed = errors.New("command is not in the exec allowlist")
	// ErrHandler refuses a handler that does not set exactly one check.
	ErrHandler = errors.New("handler must set exactly one of httpGet, tcpSocket, grpc, exec")
)

// Set builds checkers; it implements engine.Checkers. Each Checker it
// opens owns its connections until Close, but for the gRPC channels that
// checkers of the same address share (see Options.GRPCDialPerProbe): the
// last checker of a channel closes it.
type Set struct {
	opts Options
	grpc grpcChannels
}

var _ engine.Checkers = (*Set)(nil)

// New returns a Set configured by opts (zero fields defaulted; opts is
// copied, but opts.Policy is shared and must not change afterwards).
func New(opts Options) *Set {
	return &Set{opts: opts.withDefaults()}
}

// Open returns the checker of h. It returns an error, and no checker, for
// a handler it cannot run: none or several checks set, an exec probe that
// is disabled or not allowlisted, an unusable URL or CA PEM. The Policy is
// not applied here but on every dial, so a denied address makes each check
// fail with the policy's message; callers that want to refuse a literal
// address up front use Policy.CheckHost. target and typ only label the
// probe; they do not change the check.
func (s *Set) Open(target string, typ probe.Type, h probe.Handler) (engine.Checker, error) {
	n := 0
	for _, set := range []bool{h.HTTPGet != nil, h.TCPSocket != nil, h.GRPC != nil, h.Exec != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, ErrHandler
	}
	switch {
	case h.HTTPGet != nil:
		return checker(newHTTPChecker(h.HTTPGet, &s.opts))
	case h.TCPSocket != nil:
		return newTCPChecker(h.TCPSocket, &s.opts), nil
	case h.GRPC != nil:
		return checker(newGRPCChecker(h.GRPC, &s.opts, &s.grpc))
	default:
		return checker(newExecChecker(h.Exec, &s.opts))
	}
}

// checker converts a constructor's result, so that an error comes with a
// nil Checker rather than a Checker holding a nil pointer.
func checker[C engine.Checker](c C, err error) (engine.Checker, error) {
	if err != nil {
		return nil, err
	}
	return c, nil
}
