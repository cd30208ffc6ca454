package check

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestDialerPolicy(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	tests := []struct {
		name    string
		policy  *Policy
		wantErr string // "" means the dial succeeds
	}{
		{name: "nil policy"},
		{name: "other prefixes denied", policy: &Policy{Deny: DefaultDeny()}},
		{
			name:    "denied",
			policy:  &Policy{Deny: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
			wantErr: "address 127.0.0.1 is denied by the target policy (127.0.0.0/8)",
		},
		{
			name:    "not allowed",
			policy:  &Policy{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
			wantErr: "address 127.0.0.1 is not allowed by the target policy",
		},
	}
	for _, tt := range tests {
		for _, linger := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				c, err := newDialer(tt.policy, linger).DialContext(t.Context(), "tcp", l.Addr().String())
				if tt.wantErr == "" {
					if err != nil {
						t.Fatalf("dial: %v; want success", err)
					}
					c.Close()
					return
				}
				if err == nil {
					c.Close()
					t.Fatalf("dial succeeded; want %q", tt.wantErr)
				}
				if !errors.Is(err, ErrDenied) || !strings.HasSuffix(err.Error(), tt.wantErr) {
					t.Errorf("dial error = %v; want one wrapping ErrDenied ending %q", err, tt.wantErr)
				}
			})
		}
	}
}

func TestCheckAddress(t *testing.T) {
	t.Parallel()
	p := &Policy{Deny: DefaultDeny()}
	tests := []struct {
		address string
		policy  *Policy
		denied  bool
	}{
		{address: "127.0.0.1:80", policy: p},
		{address: "169.254.169.254:80", policy: p, denied: true},
		{address: "[::ffff:169.254.169.254]:80", policy: p, denied: true},
		{address: "[fe80::1%eth0]:80", policy: p, denied: true},
		{address: "not-an-address", policy: p, denied: true},
		{address: "not-an-address", policy: nil},
		{address: "0.0.0.0:80", policy: p, denied: true},
		{address: "0.0.0.0:80", policy: nil, denied: true},
		{address: "[::]:80", policy: nil, denied: true},
		{address: "[::ffff:0.0.0.0]:80", policy: p, denied: true},
		{address: "[::%eth0]:80", policy: p, denied: true},
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			t.Parallel()
			err := checkAddress(tt.policy, tt.address)
			if got := errors.Is(err, ErrDenied); got != tt.denied {
				t.Errorf("checkAddress(%q) = %v; want denied = %v", tt.address, err, tt.denied)
			}
		})
	}
}
