package check

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
)

// OwnListeners are the addresses probed itself listens on that probes may
// not connect to (its status page, its metrics): a probe of its own event
// stream makes probed serve a stream, with a snapshot and its recent
// past, on every probe, only for the checker to read 10 KiB of it. The
// dialer refuses a connection to one of them with an *OwnListenerError,
// after name resolution (Policy.Own). A listener on an unspecified
// address (every interface) matches its port on a loopback address or on
// any address the host's interfaces had when it was added.
//
// Listeners are added as they open (Add); OwnListeners is safe for
// concurrent use. The zero value holds none.
type OwnListeners struct {
	mu    sync.RWMutex
	addrs []ownListener // guarded by mu
	local []netip.Addr  // the interfaces' addresses, for unspecified listeners; guarded by mu
}

type ownListener struct {
	flag string // the flag that set it, for the message: "--ui-addr"
	addr netip.AddrPort
}

// Add records a listener of probed's, opened at addr (a *net.TCPAddr or
// an "ip:port"), named by the flag that set it. An address that is not an
// IP and port is ignored.
func (o *OwnListeners) Add(flag string, addr net.Addr) {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
	var local []netip.Addr
	if ap.Addr().IsUnspecified() {
		local = interfaceAddrs()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.addrs = append(o.addrs, ownListener{flag: flag, addr: ap})
	if local != nil {
		o.local = local
	}
}

// interfaceAddrs returns the addresses of the host's interfaces (none if
// they cannot be read).
func interfaceAddrs() []netip.Addr {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return []netip.Addr{}
	}
	out := make([]netip.Addr, 0, len(ifaddrs))
	for _, a := range ifaddrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap().WithZone(""))
		}
	}
	return out
}

// Check returns an *OwnListenerError when ap reaches one of the
// listeners, else nil. A nil *OwnListeners holds none.
func (o *OwnListeners) Check(ap netip.AddrPort) error {
	if o == nil {
		return nil
	}
	ip := ap.Addr().Unmap().WithZone("")
	o.mu.RLock()
	defer o.mu.RUnlock()
	for _, l := range o.addrs {
		if l.addr.Port() != ap.Port() {
			continue
		}
		if l.addr.Addr() == ip || l.addr.Addr().IsUnspecified() && (ip.IsLoopback() || o.isLocalLocked(ip)) {
			return &OwnListenerError{Addr: netip.AddrPortFrom(ip, ap.Port()), Flag: l.flag}
		}
	}
	return nil
}

func (o *OwnListeners) isLocalLocked(ip netip.Addr) bool {
	for _, a := range o.local {
		if a == ip {
			return true
		}
	}
	return false
}

// CheckHost checks a probe's host and port at create time: a literal IP
// address (optionally bracketed or with an IPv6 zone), or "localhost"
// or "localhost." (read as 127.0.0.1 and ::1), is checked as Check does; another name
// passes, since only the dial can see the address it resolves to.
func (o *OwnListeners) CheckHost(host string, port int32) error {
	if o == nil || port <= 0 || port > 65535 {
		return nil
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	var ips []netip.Addr
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		ips = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}
	} else if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	}
	for _, ip := range ips {
		if err := o.Check(netip.AddrPortFrom(ip, uint16(port))); err != nil {
			return err
		}
	}
	return nil
}

// OwnListenerError refuses a connection to one of probed's own listeners.
// It wraps ErrDenied.
type OwnListenerError struct {
	Addr netip.AddrPort
	Flag string // the listener's flag, "--ui-addr"
}

// Error reads "address 127.0.0.1:8080 is probed's own listener (--ui-addr):
// probing it is refused unless --allow-self-probes".
func (e *OwnListenerError) Error() string {
	return fmt.Sprintf("address %s is probed's own listener (%s): probing it is refused unless --allow-self-probes", e.Addr, e.Flag)
}

// Unwrap returns ErrDenied.
func (e *OwnListenerError) Unwrap() error { return ErrDenied }
