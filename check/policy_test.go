package check_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/probed/probed/check"
)

func TestPolicyCheck(t *testing.T) {
	t.Parallel()
	pfx := netip.MustParsePrefix
	defaultDeny := &check.Policy{Deny: check.DefaultDeny()}
	allow := &check.Policy{
		Allow: []netip.Prefix{pfx("10.0.0.0/8"), pfx("fd00::/8")},
		Deny:  []netip.Prefix{pfx("10.0.0.13/32"), pfx("::ffff:10.9.0.0/112")},
	}
	tests := []struct {
		name    string
		policy  *check.Policy
		ip      string
		wantErr string // "" means allowed
	}{
		{name: "nil policy", policy: nil, ip: "169.254.169.254"},
		{name: "empty policy", policy: &check.Policy{}, ip: "169.254.169.254"},
		{name: "metadata", policy: defaultDeny, ip: "169.254.169.254", wantErr: "address 169.254.169.254 is denied by the target policy (169.254.0.0/16)"},
		{name: "metadata 4in6", policy: defaultDeny, ip: "::ffff:169.254.169.254", wantErr: "address 169.254.169.254 is denied by the target policy (169.254.0.0/16)"},
		{name: "alibaba", policy: defaultDeny, ip: "100.100.100.200", wantErr: "address 100.100.100.200 is denied by the target policy (100.100.100.200/32)"},
		{name: "alibaba neighbour", policy: defaultDeny, ip: "100.100.100.201"},
		{name: "aws v6", policy: defaultDeny, ip: "fd00:ec2::254", wantErr: "address fd00:ec2::254 is denied by the target policy (fd00:ec2::254/128)"},
		{name: "link-local v6 with zone", policy: defaultDeny, ip: "fe80::1%eth0", wantErr: "address fe80::1 is denied by the target policy (fe80::/10)"},
		{name: "multicast v4", policy: defaultDeny, ip: "239.1.2.3", wantErr: "address 239.1.2.3 is denied by the target policy (224.0.0.0/4)"},
		{name: "multicast v6", policy: defaultDeny, ip: "ff02::1", wantErr: "address ff02::1 is denied by the target policy (ff00::/8)"},
		{name: "public", policy: defaultDeny, ip: "8.8.8.8"},
		{name: "loopback", policy: defaultDeny, ip: "127.0.0.1"},
		{name: "in allow", policy: allow, ip: "10.1.2.3"},
		{name: "in allow 4in6", policy: allow, ip: "::ffff:10.1.2.3"},
		{name: "in allow v6", policy: allow, ip: "fd12::1"},
		{name: "outside allow", policy: allow, ip: "192.168.1.1", wantErr: "address 192.168.1.1 is not allowed by the target policy"},
		{name: "deny wins", policy: allow, ip: "10.0.0.13", wantErr: "address 10.0.0.13 is denied by the target policy (10.0.0.13/32)"},
		{name: "4in6 deny prefix", policy: allow, ip: "10.9.1.1", wantErr: "address 10.9.1.1 is denied by the target policy (::ffff:10.9.0.0/112)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.policy.Check(netip.MustParseAddr(tt.ip))
			wantPolicyErr(t, err, tt.wantErr)
		})
	}
	t.Run("invalid address", func(t *testing.T) {
		t.Parallel()
		if err := defaultDeny.Check(netip.Addr{}); !errors.Is(err, check.ErrDenied) {
			t.Errorf("Check(zero Addr) = %v; want ErrDenied", err)
		}
	})
}

func TestPolicyCheckHost(t *testing.T) {
	t.Parallel()
	p := &check.Policy{Deny: check.DefaultDeny()}
	tests := []struct {
		host    string
		wantErr string
	}{
		{host: "169.254.169.254", wantErr: "address 169.254.169.254 is denied by the target policy (169.254.0.0/16)"},
		{host: "::ffff:169.254.169.254", wantErr: "address 169.254.169.254 is denied by the target policy (169.254.0.0/16)"},
		{host: "[fd00:ec2::254]", wantErr: "address fd00:ec2::254 is denied by the target policy (fd00:ec2::254/128)"},
		{host: "fe80::1%eth0", wantErr: "address fe80::1 is denied by the target policy (fe80::/10)"},
		{host: "10.0.0.1"},
		{host: "metadata.google.internal"}, // names pass; the dial checks them
		{host: "localhost"},
		{host: ""},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()
			wantPolicyErr(t, p.CheckHost(tt.host), tt.wantErr)
		})
	}
	t.Run("nil policy", func(t *testing.T) {
		t.Parallel()
		var p *check.Policy
		if err := p.CheckHost("169.254.169.254"); err != nil {
			t.Errorf("nil Policy CheckHost() = %v; want nil", err)
		}
	})
}

func TestDefaultDenyIsFresh(t *testing.T) {
	t.Parallel()
	a := check.DefaultDeny()
	a[0] = netip.MustParsePrefix("0.0.0.0/0")
	if b := check.DefaultDeny(); b[0] == a[0] {
		t.Errorf("DefaultDeny() returned a shared slice")
	}
}

func wantPolicyErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("got error %v; want nil", err)
		}
		return
	}
	if err == nil || err.Error() != want {
		t.Errorf("got error %v; want %q", err, want)
	}
	if !errors.Is(err, check.ErrDenied) {
		t.Errorf("error %v does not wrap ErrDenied", err)
	}
	var pe *check.PolicyError
	if !errors.As(err, &pe) {
		t.Errorf("error %v is not a *PolicyError", err)
	}
}
