package refused_test

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"

	"github.com/probed/probed/internal/refused"
)

func TestPortRefuses(t *testing.T) {
	t.Parallel()
	port := refused.Port(t)
	_, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial = %v, want connection refused", err)
	}
	// The port stays taken: nobody else can listen on it meanwhile.
	if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))); err == nil {
		l.Close()
		t.Fatal("another listener could take the refused port")
	}
}

func TestReservedListens(t *testing.T) {
	t.Parallel()
	r := refused.Reserve(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(r.Port)))
	if _, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial before Listen = %v, want connection refused", err)
	}
	l := r.Listen(t)
	if got := l.Addr().String(); got != addr {
		t.Fatalf("listener on %s, want %s", got, addr)
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial after Listen: %v", err)
	}
	c.Close()
	if err := <-accepted; err != nil {
		t.Fatalf("Accept: %v", err)
	}
}
