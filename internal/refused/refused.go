// Package refused gives tests a loopback port that refuses connections.
//
// Closing a listener and dialling its port races with every other test
// process on the machine: the port can be handed out again in between, and
// the "closed" port answers. A socket that is bound but never listens
// keeps the port for the test, and the kernel refuses connections to it.
package refused

import (
	"syscall"
	"testing"
)

// Port returns a port on 127.0.0.1 that refuses connections until the
// test ends.
func Port(t testing.TB) int32 {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("refused: socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("refused: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("refused: getsockname: %v", err)
	}
	return int32(sa.(*syscall.SockaddrInet4).Port)
}
