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
