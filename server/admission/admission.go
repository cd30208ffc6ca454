// Package admission is the server's target policy applied when a target is
// created or updated (engine.Options.Admit): a probe whose host is a
// literal address the check.Policy denies (or, with its port, one of
// probed's own listeners, check.OwnListeners), or an exec probe whose command
// is not allowlisted, is refused with a field error at once, rather than
// failing every time it runs. Host names are left to the dial, which
// checks every address they resolve to.
package admission

import (
	"slices"
	"strings"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// Options are the policy.
type Options struct {
	// Policy is the address policy (nil: every address).
	Policy *check.Policy
	// ExecAllowlist, when not empty, lists the only command[0] values an
	// exec probe may have (compared exactly, as check does). It is
	// applied only when AllowExec is set: otherwise target validation
	// refuses every exec probe already.
	ExecAllowlist []string
	AllowExec     bool
}

// New returns the admission check of o, for engine.Options.Admit. It
// tolerates any spec, valid or not: it only adds errors.
func New(o Options) func(*target.Spec) field.List {
	o.ExecAllowlist = slices.Clone(o.ExecAllowlist)
	return func(spec *target.Spec) field.List { return o.admit(spec) }
}

func (o Options) admit(spec *target.Spec) field.List {
	if spec == nil {
		return nil
	}
	var errs field.List
	root := field.NewPath("target")
	for _, t := range probe.Types {
		p := spec.Probe(t)
		if p == nil {
			continue
		}
		path := root.Child(t.Field())
		h := &p.Handler
		if h.HTTPGet != nil {
			errs = append(errs, o.host(path.Child("httpGet").Child("host"), h.HTTPGet.Host, h.HTTPGet.Port)...)
		}
		if h.TCPSocket != nil {
			errs = append(errs, o.host(path.Child("tcpSocket").Child("host"), h.TCPSocket.Host, h.TCPSocket.Port)...)
		}
		if h.GRPC != nil {
			errs = append(errs, o.host(path.Child("grpc").Child("host"), h.GRPC.Host, h.GRPC.Port)...)
		}
		if h.Exec != nil {
			errs = append(errs, o.exec(path.Child("exec").Child("command"), h.Exec.Command)...)
		}
	}
	return errs
}

func (o Options) host(path *field.Path, host string, port int32) field.List {
	if host == "" {
		return nil // validation reports it
	}
	if err := o.Policy.CheckHostPort(host, port); err != nil {
		return field.List{field.Invalid(path, host, err.Error())}
	}
	return nil
}

func (o Options) exec(path *field.Path, command []string) field.List {
	if !o.AllowExec || len(o.ExecAllowlist) == 0 || len(command) == 0 || command[0] == "" {
		return nil // refused or reported by validation
	}
	if slices.Contains(o.ExecAllowlist, command[0]) {
		return nil
	}
	return field.List{field.Invalid(path.Index(0), command[0],
		"command is not in the exec allowlist (--exec-allowlist): "+strings.Join(o.ExecAllowlist, ", "))}
}
