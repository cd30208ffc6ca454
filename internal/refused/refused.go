// Package refused gives tests loopback ports that refuse connections and
// that no other test can be handed meanwhile.
//
// Closing a listener and dialling its port, or listening on it again
// later, races with every other test process on the machine: the port can
// be handed out again in between, and the "closed" port answers or the
// new listener fails. A socket that is bound but never listens keeps the
// port for the test, and the kernel refuses connections to it.
package refused

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// Port returns a port on 127.0.0.1 that refuses connections until the
// test ends; nobody can listen on it meanwhile.
func Port(t testing.TB) int32 {
	t.Helper()
	return bind(t, false)
}

// Reserved is a port on 127.0.0.1 for a listener that starts later, in
// this process or a child, maybe several times (a server restarted on the
// same address). Until then, and between listeners, it refuses
// connections, and the kernel hands it to nobody who asks for a free
// port (port 0).
type Reserved struct {
	Port int32
}

// Reserve reserves a port until the test ends. The reservation is a
// bound socket with SO_REUSEADDR, which lets listeners (Go sets
// SO_REUSEADDR on every TCP listener) bind the port by its number.
func Reserve(t testing.TB) Reserved {
	t.Helper()
	return Reserved{Port: bind(t, true)}
}

// Addr is the reserved address, "127.0.0.1:port".
func (r Reserved) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(r.Port)))
}

// Listen listens on the reserved port until the test ends (closing the
// listener earlier is fine; the reservation stays).
func (r Reserved) Listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", r.Addr())
	if err != nil {
		t.Fatalf("refused: listen on the reserved %s: %v", r.Addr(), err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// bind binds a socket to a free port on 127.0.0.1 without listening and
// closes it when the test ends.
func bind(t testing.TB, reuse bool) int32 {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("refused: socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if reuse {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
			t.Fatalf("refused: SO_REUSEADDR: %v", err)
		}
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("refused: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("refused: getsockname: %v", err)
	}
	return int32(sa.(*syscall.SockaddrInet4).Port)
}
