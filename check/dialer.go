package check

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// lingerSeconds is the SO_LINGER timeout of probe sockets that are not
// kept alive: kubelet's ProbeDialer value (k8s#89898, #115143), which keeps
// high-rate probing from exhausting ports with sockets in TIME_WAIT.
const lingerSeconds = 1

// newDialer returns the net.Dialer every network checker connects with.
// Its ControlContext runs on each socket just before connect, with the
// address actually being connected (after resolution), and refuses it with
// a *PolicyError when policy denies it; with linger it also sets
// SO_LINGER{on, 1s} on the socket. Deadlines come from the dial's context.
func newDialer(policy *Policy, linger bool) *net.Dialer {
	return &net.Dialer{
		ControlContext: func(_ context.Context, network, address string, c syscall.RawConn) error {
			if err := checkAddress(policy, address); err != nil {
				return err
			}
			if !linger {
				return nil
			}
			return setLinger(c)
		},
	}
}

// checkAddress applies policy to address, an "ip:port" as the dialer's
// Control hooks receive it. An address that does not parse is refused by
// any non-nil policy (fail closed). The unspecified addresses (0.0.0.0,
// ::, ::ffff:0.0.0.0) are refused whatever the policy: connecting to one
// reaches this host, past a deny list of its loopback addresses, and no
// probe means that. The policy's Own listeners are refused too.
func checkAddress(policy *Policy, address string) error {
	ap, err := netip.ParseAddrPort(address)
	if ip := ap.Addr().Unmap().WithZone(""); err == nil && ip.IsUnspecified() {
		return &UnspecifiedError{Addr: ip}
	}
	if policy == nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot check address %q against the target policy: %w", address, ErrDenied)
	}
	if err := policy.Check(ap.Addr()); err != nil {
		return err
	}
	return policy.Own.Check(ap)
}

// setLinger sets SO_LINGER{on, lingerSeconds} on c.
func setLinger(c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER,
			&syscall.Linger{Onoff: 1, Linger: lingerSeconds})
	})
	if err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("set SO_LINGER: %w", serr)
	}
	return nil
}
