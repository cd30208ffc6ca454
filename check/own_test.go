package check

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestOwnListeners(t *testing.T) {
	t.Parallel()
	own := &OwnListeners{}
	own.Add("--ui-addr", &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080})
	own.Add("--metrics-addr", &net.TCPAddr{IP: net.IPv6unspecified, Port: 9464})
	own.Add("--nothing", &net.UnixAddr{Name: "/tmp/x", Net: "unix"}) // ignored
	var iface netip.Addr                                             // an address of an interface, if the host has one besides loopback
	for _, a := range interfaceAddrs() {
		if !a.IsLoopback() {
			iface = a
			break
		}
	}
	tests := []struct {
		name string
		addr string
		want string // the flag named; "" means allowed
	}{
		{name: "the listener's address", addr: "127.0.0.1:8080", want: "--ui-addr"},
		{name: "its 4in6 form", addr: "[::ffff:127.0.0.1]:8080", want: "--ui-addr"},
		{name: "another loopback address", addr: "127.0.0.2:8080"},
		{name: "another port", addr: "127.0.0.1:8081"},
		{name: "every interface: IPv4 loopback", addr: "127.0.0.1:9464", want: "--metrics-addr"},
		{name: "every interface: IPv6 loopback", addr: "[::1]:9464", want: "--metrics-addr"},
		{name: "every interface: another host", addr: "192.0.2.1:9464"},
	}
	if iface.IsValid() {
		tests = append(tests, struct{ name, addr, want string }{name: "every interface: an interface", addr: netip.AddrPortFrom(iface, 9464).String(), want: "--metrics-addr"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := own.Check(netip.MustParseAddrPort(tt.addr))
			checkOwnErr(t, err, tt.want)
		})
	}
	if err := (*OwnListeners)(nil).Check(netip.MustParseAddrPort("127.0.0.1:8080")); err != nil {
		t.Errorf("nil OwnListeners: %v, want nil", err)
	}
}

func checkOwnErr(t *testing.T, err error, flag string) {
	t.Helper()
	if flag == "" {
		if err != nil {
			t.Errorf("got %v, want nil", err)
		}
		return
	}
	var oe *OwnListenerError
	if !errors.As(err, &oe) || !errors.Is(err, ErrDenied) || oe.Flag != flag || !strings.Contains(err.Error(), "--allow-self-probes") {
		t.Errorf("got %v, want an OwnListenerError wrapping ErrDenied naming %s and --allow-self-probes", err, flag)
	}
}

func TestPolicyCheckHostPort(t *testing.T) {
	t.Parallel()
	own := &OwnListeners{}
	own.Add("--ui-addr", &net.TCPAddr{IP: net.IPv4zero, Port: 8080})
	p := &Policy{Deny: DefaultDeny(), Own: own}
	tests := []struct {
		name string
		host string
		port int32
		want string
	}{
		{name: "literal", host: "127.0.0.1", port: 8080, want: "--ui-addr"},
		{name: "bracketed IPv6", host: "[::1]", port: 8080, want: "--ui-addr"},
		{name: "localhost", host: "LocalHost", port: 8080, want: "--ui-addr"},
		{name: "another port", host: "127.0.0.1", port: 8081},
		{name: "a name: left to the dial", host: "probed.example", port: 8080},
		{name: "no port", host: "127.0.0.1", port: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkOwnErr(t, p.CheckHostPort(tt.host, tt.port), tt.want)
		})
	}
	if err := p.CheckHostPort("169.254.169.254", 80); !errors.Is(err, ErrDenied) {
		t.Errorf("a denied address: %v, want ErrDenied", err)
	}
}

func TestDialerRefusesOwnListeners(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	own := &OwnListeners{}
	p := &Policy{Own: own}
	c, err := newDialer(p, false).DialContext(t.Context(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("dial before the listener is probed's: %v", err)
	}
	c.Close()
	own.Add("--ui-addr", l.Addr())
	// By name: only the dial sees the address.
	_, port, _ := net.SplitHostPort(l.Addr().String())
	c, err = newDialer(p, true).DialContext(t.Context(), "tcp", net.JoinHostPort("localhost", port))
	if err == nil {
		c.Close()
		t.Fatal("dial of probed's own listener succeeded")
	}
	checkOwnErr(t, errors.Unwrap(err), "--ui-addr")
}
