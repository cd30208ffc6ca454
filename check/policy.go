package check

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrDenied is the error every refusal of the target Policy wraps; test for
// it with errors.Is.
var ErrDenied = errors.New("denied by the target policy")

// Policy limits the addresses checkers may connect to (an SSRF guard). The
// shared dialer applies it to the address of every socket it is about to
// connect, after name resolution, so a name that resolves (or rebinds) to a
// forbidden address is refused too. A nil *Policy allows every address.
//
// A Policy is read by concurrent dials and must not be modified once it is
// handed to New.
type Policy struct {
	// Allow, when non-empty, lists the only prefixes that may be reached.
	Allow []netip.Prefix
	// Deny lists prefixes that may never be reached; Deny wins over Allow.
	Deny []netip.Prefix
	// Own, when set, are probed's own listeners, which may not be reached
	// either (whatever Allow says); listeners are added to it as they
	// open.
	Own *OwnListeners
}

// DefaultDeny returns the prefixes a probe engine should normally refuse:
// link-local addresses (where cloud metadata services live, 169.254.169.254
// among them), Alibaba's metadata address, AWS's IPv6 metadata address and
// multicast. It returns a new slice on every call.
func DefaultDeny() []netip.Prefix {
	return []netip.Prefix{
		netip.MustParsePrefix("169.254.0.0/16"),
		netip.MustParsePrefix("fe80::/10"),
		netip.MustParsePrefix("100.100.100.200/32"),
		netip.MustParsePrefix("fd00:ec2::254/128"),
		netip.MustParsePrefix("224.0.0.0/4"),
		netip.MustParsePrefix("ff00::/8"),
	}
}

// PolicyError is the error of an address the Policy refuses. It wraps
// ErrDenied.
type PolicyError struct {
	Addr netip.Addr // the address as checked: 4in6 unmapped, zone removed
	// Prefix is the Deny prefix that matched; it is invalid (the zero
	// Prefix) when the address was refused for being outside Allow.
	Prefix netip.Prefix
}

// Error reads "address 169.254.169.254 is denied by the target policy
// (169.254.0.0/16)" or "address 10.0.0.1 is not allowed by the target
// policy".
func (e *PolicyError) Error() string {
	if e.Prefix.IsValid() {
		return fmt.Sprintf("address %s is denied by the target policy (%s)", e.Addr, e.Prefix)
	}
	return fmt.Sprintf("address %s is not allowed by the target policy", e.Addr)
}

// Unwrap returns ErrDenied.
func (e *PolicyError) Unwrap() error { return ErrDenied }

// UnspecifiedError refuses a connection to an unspecified address (0.0.0.0,
// ::), which reaches the local host whatever the policy says about its
// addresses. It wraps ErrDenied.
type UnspecifiedError struct {
	Addr netip.Addr
}

// Error reads "address 0.0.0.0 is unspecified (it means this host), never
// a probe target".
func (e *UnspecifiedError) Error() string {
	return fmt.Sprintf("address %s is unspecified (it means this host), never a probe target", e.Addr)
}

// Unwrap returns ErrDenied.
func (e *UnspecifiedError) Unwrap() error { return ErrDenied }

// Check returns nil when ip may be connected to, else a *PolicyError. An
// IPv4-mapped IPv6 address (::ffff:a.b.c.d) is checked as the IPv4 address
// it carries and an IPv6 zone is ignored, so neither can slip past an IPv4
// or zone-less prefix. The invalid (zero) Addr is refused by any non-nil
// Policy. A nil Policy allows everything.
func (p *Policy) Check(ip netip.Addr) error {
	if p == nil {
		return nil
	}
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return &PolicyError{Addr: ip}
	}
	for _, pfx := range p.Deny {
		if contains(pfx, ip) {
			return &PolicyError{Addr: ip, Prefix: pfx}
		}
	}
	if len(p.Allow) == 0 {
		return nil
	}
	for _, pfx := range p.Allow {
		if contains(pfx, ip) {
			return nil
		}
	}
	return &PolicyError{Addr: ip}
}

// CheckHost checks a probe's host at create time: a literal IP address
// (optionally bracketed or with an IPv6 zone) is checked as Check does; a
// name passes, since only the dial can see the address it resolves to.
func (p *Policy) CheckHost(host string) error {
	if p == nil {
		return nil
	}
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.Check(ip)
	}
	return nil // a name: checked at dial time
}

// CheckHostPort is CheckHost, and checks a literal address (or
// "localhost") with port against Own.
func (p *Policy) CheckHostPort(host string, port int32) error {
	if p == nil {
		return nil
	}
	if err := p.CheckHost(host); err != nil {
		return err
	}
	return p.Own.CheckHost(host, port)
}

// contains reports whether pfx holds ip, reading a 4in6 prefix
// (::ffff:a.b.c.d/96+n) as the IPv4 prefix a.b.c.d/n; ip is already
// unmapped and zone-less.
func contains(pfx netip.Prefix, ip netip.Addr) bool {
	if a := pfx.Addr(); a.Is4In6() && pfx.Bits() >= 96 {
		pfx = netip.PrefixFrom(a.Unmap(), pfx.Bits()-96)
	}
	return pfx.Contains(ip)
}
