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

func TestReservedListensAgainAndAgain(t *testing.T) {
	t.Parallel()
	r := refused.Reserve(t)
	if _, err := net.Dial("tcp", r.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial before Listen = %v, want connection refused", err)
	}
	// A server restarted on the same address: each listener takes the
	// port, and between them it refuses again.
	for i := range 3 {
		l := r.Listen(t)
		if got := l.Addr().String(); got != r.Addr() {
			t.Fatalf("listener on %s, want %s", got, r.Addr())
		}
		accepted := make(chan error, 1)
		go func() {
			c, err := l.Accept()
			if err == nil {
				c.Close()
			}
			accepted <- err
		}()
		c, err := net.Dial("tcp", r.Addr())
		if err != nil {
			t.Fatalf("listener %d: dial: %v", i, err)
		}
		c.Close()
		if err := <-accepted; err != nil {
			t.Fatalf("listener %d: Accept: %v", i, err)
		}
		l.Close()
		if _, err := net.Dial("tcp", r.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial after listener %d closed = %v, want connection refused", i, err)
		}
	}
}
