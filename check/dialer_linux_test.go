//go:build linux && (amd64 || arm64)

package check

import (
	"net"
	"syscall"
	"testing"
	"unsafe"
)

func TestDialerLinger(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	tests := []struct {
		name   string
		linger bool
		want   syscall.Linger
	}{
		{name: "kept alive", want: syscall.Linger{}},
		{name: "linger", linger: true, want: syscall.Linger{Onoff: 1, Linger: lingerSeconds}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := newDialer(nil, tt.linger).DialContext(t.Context(), "tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := getLinger(t, c.(*net.TCPConn)); got != tt.want {
				t.Errorf("SO_LINGER = %+v; want %+v", got, tt.want)
			}
		})
	}
}

func getLinger(t *testing.T, c *net.TCPConn) syscall.Linger {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var l syscall.Linger
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		size := uint32(unsafe.Sizeof(l))
		_, _, errno = syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.SOL_SOCKET, syscall.SO_LINGER,
			uintptr(unsafe.Pointer(&l)), uintptr(unsafe.Pointer(&size)), 0)
	}); err != nil {
		t.Fatal(err)
	}
	if errno != 0 {
		t.Fatalf("getsockopt(SO_LINGER): %v", errno)
	}
	return l
}
