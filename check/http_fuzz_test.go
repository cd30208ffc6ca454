package check_test

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine/probe"
)

// rawServer answers every connection with the same raw bytes, whatever
// they are, then closes it.
type rawServer struct {
	lis  net.Listener
	resp []byte
	wg   sync.WaitGroup
}

func startRawServer(t *testing.T, resp []byte) *rawServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{lis: lis, resp: resp}
	s.wg.Go(s.serve)
	return s
}

func (s *rawServer) serve() {
	for {
		c, err := s.lis.Accept()
		if err != nil {
			return
		}
		s.wg.Go(func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			// Read the request head, so the response is not a reply to
			// nothing (a client may treat that differently).
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			_, _ = c.Write(s.resp)
		})
	}
}

func (s *rawServer) close() {
	_ = s.lis.Close()
	s.wg.Wait()
}

// FuzzHTTPResponse has the HTTP checker read arbitrary bytes as the
// response of a probed server: it must return an Outcome — success or
// failure, never a panic — within its timeout, with a message that is
// valid UTF-8 (it goes into a proto string) and bounded.
func FuzzHTTPResponse(f *testing.F) {
	for i, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 301 Moved\r\nLocation: http://elsewhere.invalid/\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n\xff\xfe body",
		"HTTP/1.0 200 OK\r\n\r\n\x1b[31mred\x1b[0m\x00",
		"HTTP/1.1 999 Weird\r\n\r\n",
		"HTTP/1.1 20 OK\r\n\r\n",
		"\xff\xfe\xfd",
		"",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nX: \xff\r\n\r\n",
	} {
		f.Add([]byte(seed), i%2 == 0, i%3 == 0) // keep-alive, expected body: some of each
	}
	f.Fuzz(func(t *testing.T, resp []byte, keepAlive, expectBody bool) {
		s := startRawServer(t, resp)
		defer s.close()
		_, p, _ := net.SplitHostPort(s.lis.Addr().String())
		port, _ := strconv.Atoi(p)
		g := &probe.HTTPGet{Host: "127.0.0.1", Port: int32(port), Path: "/healthz", DisableKeepAlive: !keepAlive}
		if expectBody {
			g.ExpectedBody = "ok"
		}
		c, err := check.New(check.Options{}).Open("fuzz", probe.Readiness, probe.Handler{HTTPGet: g})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		const limit = 2 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		start := time.Now()
		out := c.Check(ctx)
		if took := time.Since(start); took > limit+time.Second {
			t.Fatalf("Check took %v, timeout %v", took, limit)
		}
		if out.Result != probe.Success && out.Result != probe.Failure {
			t.Fatalf("result %v (%q), want success or failure", out.Result, out.Message)
		}
		if !utf8.ValidString(out.Message) {
			t.Fatalf("message is not valid UTF-8: %q", out.Message)
		}
		if len(out.Message) > 2*check.DefaultMaxBodyBytes+1024 {
			t.Fatalf("message of %d bytes", len(out.Message))
		}
	})
}
