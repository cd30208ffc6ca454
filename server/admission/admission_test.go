package admission_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/server/admission"
)

func TestAdmit(t *testing.T) {
	t.Parallel()
	defaults := &check.Policy{Deny: check.DefaultDeny()}
	only10 := &check.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Deny: check.DefaultDeny()}
	httpGet := func(host string) *probe.Spec {
		return &probe.Spec{Handler: probe.Handler{HTTPGet: &probe.HTTPGet{Host: host, Port: 80}}}
	}
	exec := func(cmd ...string) *probe.Spec {
		return &probe.Spec{Handler: probe.Handler{Exec: &probe.Exec{Command: cmd}}}
	}
	tests := []struct {
		name string
		opts admission.Options
		spec *target.Spec
		want []string // "field: description"
	}{
		{
			name: "metadata address",
			opts: admission.Options{Policy: defaults},
			spec: &target.Spec{Name: "a", ReadinessProbe: httpGet("169.254.169.254")},
			want: []string{`target.readinessProbe.httpGet.host: Invalid value: "169.254.169.254": address 169.254.169.254 is denied by the target policy (169.254.0.0/16)`},
		},
		{
			name: "every handler with a host, IPv4-mapped and zoned addresses",
			opts: admission.Options{Policy: defaults},
			spec: &target.Spec{
				Name:           "a",
				StartupProbe:   &probe.Spec{Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: "::ffff:169.254.1.1", Port: 1}}},
				LivenessProbe:  &probe.Spec{Handler: probe.Handler{GRPC: &probe.GRPC{Host: "fe80::1%eth0", Port: 1}}},
				ReadinessProbe: httpGet("224.0.0.1"),
			},
			want: []string{
				`target.startupProbe.tcpSocket.host: Invalid value: "::ffff:169.254.1.1": address 169.254.1.1 is denied by the target policy (169.254.0.0/16)`,
				`target.livenessProbe.grpc.host: Invalid value: "fe80::1%eth0": address fe80::1 is denied by the target policy (fe80::/10)`,
				`target.readinessProbe.httpGet.host: Invalid value: "224.0.0.1": address 224.0.0.1 is denied by the target policy (224.0.0.0/4)`,
			},
		},
		{
			name: "names are left to the dial",
			opts: admission.Options{Policy: only10},
			spec: &target.Spec{Name: "a", ReadinessProbe: httpGet("metadata.google.internal")},
		},
		{
			name: "outside the allow list",
			opts: admission.Options{Policy: only10},
			spec: &target.Spec{Name: "a", ReadinessProbe: httpGet("127.0.0.1")},
			want: []string{`target.readinessProbe.httpGet.host: Invalid value: "127.0.0.1": address 127.0.0.1 is not allowed by the target policy`},
		},
		{
			name: "allowed",
			opts: admission.Options{Policy: defaults},
			spec: &target.Spec{Name: "a", ReadinessProbe: httpGet("10.1.2.3")},
		},
		{
			name: "nil policy",
			spec: &target.Spec{Name: "a", ReadinessProbe: httpGet("169.254.169.254")},
		},
		{
			name: "exec not in the allowlist",
			opts: admission.Options{AllowExec: true, ExecAllowlist: []string{"/bin/true", "pg_isready"}},
			spec: &target.Spec{Name: "a", LivenessProbe: exec("/bin/sh", "-c", "true")},
			want: []string{`target.livenessProbe.exec.command[0]: Invalid value: "/bin/sh": command is not in the exec allowlist (--exec-allowlist): /bin/true, pg_isready`},
		},
		{
			name: "exec in the allowlist",
			opts: admission.Options{AllowExec: true, ExecAllowlist: []string{"/bin/true", "pg_isready"}},
			spec: &target.Spec{Name: "a", LivenessProbe: exec("pg_isready", "-h", "db")},
		},
		{
			name: "exec disabled: validation refuses it, not admission",
			opts: admission.Options{ExecAllowlist: []string{"/bin/true"}},
			spec: &target.Spec{Name: "a", LivenessProbe: exec("/bin/sh")},
		},
		{
			name: "invalid specs add nothing",
			opts: admission.Options{Policy: defaults, AllowExec: true, ExecAllowlist: []string{"x"}},
			spec: &target.Spec{Name: "a", ReadinessProbe: httpGet(""), LivenessProbe: exec(), StartupProbe: &probe.Spec{}},
		},
		{name: "nil spec", opts: admission.Options{Policy: defaults}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, e := range admission.New(tt.opts)(tt.spec) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// The admission check is an engine.Options.Admit.
var _ func(*target.Spec) field.List = admission.New(admission.Options{})
