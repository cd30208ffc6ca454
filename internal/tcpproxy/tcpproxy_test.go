package tcpproxy_test

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/probed/probed/internal/tcpproxy"
)

// echo starts a line echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return lis.Addr().String()
}

// TestPauseHoldsResumeDelivers: bytes pass; while paused nothing does,
// on an open connection or a new one, and nothing is refused; after
// Resume what was held arrives.
func TestPauseHoldsResumeDelivers(t *testing.T) {
	p := tcpproxy.Start(t, echo(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func(c net.Conn, r *bufio.Reader, wait time.Duration) (string, error) {
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(wait))
		return r.ReadString('\n')
	}
	if got, err := roundTrip(c, r, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("before Pause: %q, %v", got, err)
	}
	p.Pause()
	if got, err := roundTrip(c, r, 200*time.Millisecond); err == nil {
		t.Fatalf("paused: got %q through an open connection", got)
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("paused: a new connection was refused: %v", err)
	}
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	if got, err := roundTrip(c2, r2, 200*time.Millisecond); err == nil {
		t.Fatalf("paused: got %q through a new connection", got)
	}
	p.Resume()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("after Resume, the held line: %q, %v", got, err)
	}
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r2.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("after Resume, the new connection's held line: %q, %v", got, err)
	}
}

// TestCutClosesOpenConnections: Cut ends the connections open; a new one
// goes through.
func TestCutClosesOpenConnections(t *testing.T) {
	p := tcpproxy.Start(t, echo(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after Cut: %v, want the connection closed", err)
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_ = c2.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c2.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := bufio.NewReader(c2).ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("a new connection after Cut: %q, %v", got, err)
	}
}

// TestFailoverToTheNextUpstream: connections go to the first upstream
// that accepts; once it is gone, its connections close and new ones go
// to the next.
func TestFailoverToTheNextUpstream(t *testing.T) {
	first, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := first.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	p := tcpproxy.StartFailover(t, first.Addr().String(), echo(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var up net.Conn
	select {
	case up = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the first upstream got no connection")
	}
	// The first upstream dies: its listener and its connection close.
	_ = first.Close()
	_ = up.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := bufio.NewReader(c).ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the upstream died: %v, want the connection closed", err)
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_ = c2.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c2.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := bufio.NewReader(c2).ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("a connection after the first upstream died: %q, %v (want the second's echo)", got, err)
	}
}
