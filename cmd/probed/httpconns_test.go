package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestHTTPListenersAreBounded: the status page and the metrics listener
// refuse connections beyond their bound per IP address (128, as the API's
// default), closing them at once, while a connection that made an
// authenticated request is kept and serves its next request.
func TestHTTPListenersAreBounded(t *testing.T) {
	t.Parallel()
	tokens := tokenFile(t, aliceToken+" alice")
	cfg := testConfig(t, "--auth-token-file", tokens, "--ui-addr", "127.0.0.1:0")
	metricsAddr := make(chan net.Addr, 1)
	cfg.telemetry.listening = func(a net.Addr) { metricsAddr <- a }
	uiAddr := make(chan string, 1)
	cfg.ui.listening = func(a net.Addr) { uiAddr <- a.String() }
	runServer(t, cfg)
	for _, ep := range []struct{ name, addr, path string }{
		{"metrics", (<-metricsAddr).String(), metricsPath},
		{"status page", <-uiAddr, "/"},
	} {
		t.Run(ep.name, func(t *testing.T) {
			// An admitted connection: it makes an authenticated request.
			authed := dialHTTP(t, ep.addr)
			authed.get(t, ep.path, "Bearer "+aliceToken, http.StatusOK)
			// Idle connections from the same address, up to the bound with
			// the admitted one.
			for range defaultMaxConnectionsPerIP - 1 {
				dialHTTP(t, ep.addr)
			}
			// Over the bound: closed as soon as accepted, with a reset that
			// may reach the dial itself.
			if over, err := net.Dial("tcp", ep.addr); err == nil {
				c := &httpConn{conn: over, r: bufio.NewReader(over)}
				t.Cleanup(func() { _ = over.Close() })
				if err := c.closedWithin(5 * time.Second); err != nil {
					t.Fatalf("connection %d from one address: %v", defaultMaxConnectionsPerIP+1, err)
				}
			}
			authed.get(t, ep.path, "Bearer "+aliceToken, http.StatusOK)
		})
	}
}

// httpConn is one HTTP/1.1 connection made by hand, so that requests go
// over it and no other.
type httpConn struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialHTTP(t *testing.T, addr string) *httpConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &httpConn{conn: c, r: bufio.NewReader(c)}
}

// get sends a GET of path over the connection and checks the status.
func (c *httpConn) get(t *testing.T, path, authorization string, want int) {
	t.Helper()
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: localhost\r\nAuthorization: %s\r\n\r\n", path, authorization)
	if _, err := io.WriteString(c.conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %s, want %d", path, resp.Status, want)
	}
}

// closedWithin reports nil once the server has closed the connection
// (a read ends), or an error if it is still open after d.
func (c *httpConn) closedWithin(d time.Duration) error {
	if err := c.conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	_, err := c.r.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("still open after %v", d)
	}
	if err == nil {
		return errors.New("the server sent data on a connection it should have closed")
	}
	return nil
}
