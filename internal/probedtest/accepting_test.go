package probedtest_test

import (
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/probed/probed/internal/probedtest"
)

func TestAcceptingAcceptsAndCloses(t *testing.T) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(probedtest.Accepting(t))))
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		// The server closes at once: the read ends with EOF, not a timeout.
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
			t.Errorf("read = %d, %v; want 0, EOF", n, err)
		}
		c.Close()
	}
}
