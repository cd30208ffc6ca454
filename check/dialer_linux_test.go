//go:build linux && (amd64 || arm64)

package check

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/probed/probed/engine/probe"
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

// TestTCPProbesLeaveNothingInTimeWait: a TCP probe's connection is reset
// when it closes, so a thousand probes of one address leave no socket of
// theirs in TIME_WAIT (with SO_LINGER{on, 1s}, kubelet's setting, every
// one stayed there for 60 s).
func TestTCPProbesLeaveNothingInTimeWait(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() { // ends when the listener closes
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = c.Read(make([]byte, 1)); _ = c.Close() }()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	opts := Options{}.withDefaults()
	c := newTCPChecker(&probe.TCPSocket{Host: "127.0.0.1", Port: int32(port)}, &opts)
	const probes = 1000
	for range probes {
		if out := c.Check(t.Context()); out.Result != probe.Success {
			t.Fatalf("probe: %v %s", out.Result, out.Message)
		}
	}
	if n := timeWaitTo(t, port); n > 0 {
		t.Errorf("%d of %d probe connections to port %d in TIME_WAIT, want none", n, probes, port)
	}
}

// timeWaitTo counts the IPv4 sockets in TIME_WAIT whose remote port is
// port (/proc/net/tcp: state 06).
func timeWaitTo(t *testing.T, port int) int {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	defer f.Close()
	suffix := fmt.Sprintf(":%04X", port)
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 3 && strings.HasSuffix(fields[2], suffix) && fields[3] == "06" {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
