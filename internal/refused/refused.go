// Package refused gives tests a loopback port that refuses connections.
//
// Closing a listener and dialling its port races with every other test
// process on the machine: the port can be handed out again in between, and
// the "closed" port answers. A socket that is bound but never listens
// keeps the port for the test, and the kernel refuses connections to it.
package refused

import (
	"net"
	"os"
	"syscall"
	"testing"
)

// Port returns a port on 127.0.0.1 that refuses connections until the
// test ends.
func Port(t testing.TB) int32 {
	t.Helper()
	return Reserve(t).Port
}

// Reserved is a port on 127.0.0.1 that refuses connections until Listen
// turns it into a listener on the same port, which nobody else could
// take in between.
type Reserved struct {
	Port int32
	fd   int // the bound socket; -1 once Listen handed it over
}

// Reserve binds a port on 127.0.0.1 without listening on it; the socket
// is closed when the test ends.
func Reserve(t testing.TB) *Reserved {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("refused: socket: %v", err)
	}
	r := &Reserved{fd: fd}
	t.Cleanup(func() {
		if r.fd >= 0 {
			_ = syscall.Close(r.fd)
		}
	})
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("refused: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("refused: getsockname: %v", err)
	}
	r.Port = int32(sa.(*syscall.SockaddrInet4).Port)
	return r
}

// Listen starts listening on the reserved port and returns the listener;
// the test closes it (closing it twice is harmless).
func (r *Reserved) Listen(t testing.TB) net.Listener {
	t.Helper()
	if err := syscall.Listen(r.fd, syscall.SOMAXCONN); err != nil {
		t.Fatalf("refused: listen: %v", err)
	}
	f := os.NewFile(uintptr(r.fd), "refused")
	r.fd = -1
	l, err := net.FileListener(f) // holds its own duplicate of the socket
	_ = f.Close()
	if err != nil {
		t.Fatalf("refused: listener: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}
