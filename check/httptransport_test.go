package check_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine/probe"
)

// reply is what a scriptServer does with one request.
type reply int

const (
	answer         reply = iota // 200 "ok", the connection kept open
	answerAndClose              // 200 "ok" (no Connection: close), then close: the server's idle close
	hangUp                      // close without answering: the server closed as the request arrived
	halfAnswer                  // the start of a status line, then close
	timedOut                    // 408 and close: a server announcing it timed out an idle connection
)

// scriptServer is a raw HTTP/1.1 server whose every reply is chosen by
// script(connection, request), both counted from 0. It records the
// requests each connection carried.
type scriptServer struct {
	lis    net.Listener
	script func(conn, req int) reply

	mu    sync.Mutex
	conns []int // guarded by mu: requests read on each connection
	wg    sync.WaitGroup
}

func newScriptServer(t *testing.T, script func(conn, req int) reply) *scriptServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptServer{lis: lis, script: script}
	s.wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			n := len(s.conns)
			s.conns = append(s.conns, 0)
			s.mu.Unlock()
			s.wg.Go(func() { s.serve(c, n) })
		}
	})
	t.Cleanup(func() {
		_ = lis.Close()
		s.wg.Wait()
	})
	return s
}

func (s *scriptServer) serve(c net.Conn, n int) {
	defer func() { _ = c.Close() }()
	r := bufio.NewReader(c)
	for i := 0; ; i++ {
		if _, err := http.ReadRequest(r); err != nil {
			return
		}
		s.mu.Lock()
		s.conns[n]++
		s.mu.Unlock()
		switch s.script(n, i) {
		case answer:
			_, _ = fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		case answerAndClose:
			_, _ = fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			return
		case hangUp:
			return
		case halfAnswer:
			_, _ = fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-")
			return
		case timedOut:
			_, _ = fmt.Fprint(c, "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
			return
		}
	}
}

// requests returns the requests each connection carried so far.
func (s *scriptServer) requests() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.conns...)
}

func (s *scriptServer) probe(t *testing.T) probe.Handler {
	t.Helper()
	host, port := hostPort(t, s.lis.Addr().String())
	return probe.Handler{HTTPGet: &probe.HTTPGet{Host: host, Port: port}}
}

// TestHTTPStaleConnection: a kept-alive connection the server has closed,
// closes as the next request arrives, or answers with a 408 (a server
// timing out an idle connection) costs the probe nothing: the request goes
// once more on a new connection, as net/http does for a request that
// cannot have been processed. Only then: a failure on a new connection,
// or after the answer started, is the probe's result.
func TestHTTPStaleConnection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script func(conn, req int) reply
		want   []probe.Result
		msg    string // contained in the last failure's message
		// wantReqs is what each connection carried: every retry is a new
		// connection, and a request not retried leaves none.
		wantReqs []int
	}{
		{
			name:     "closed while idle",
			script:   func(int, int) reply { return answerAndClose },
			want:     []probe.Result{probe.Success, probe.Success, probe.Success},
			wantReqs: []int{1, 1, 1},
		},
		{
			name: "closed as the request arrives: retried once",
			script: func(conn, req int) reply {
				if conn == 0 && req == 1 {
					return hangUp
				}
				return answer
			},
			want:     []probe.Result{probe.Success, probe.Success, probe.Success},
			wantReqs: []int{2, 2},
		},
		{
			name: "408 on a kept connection: retried once",
			script: func(conn, req int) reply {
				if conn == 0 && req == 1 {
					return timedOut
				}
				return answer
			},
			want:     []probe.Result{probe.Success, probe.Success, probe.Success},
			wantReqs: []int{2, 2},
		},
		{
			name:     "408 on a new connection: the answer",
			script:   func(int, int) reply { return timedOut },
			want:     []probe.Result{probe.Failure},
			msg:      "HTTP probe failed with statuscode: 408",
			wantReqs: []int{1},
		},
		{
			name:     "a new connection closed without an answer: not retried",
			script:   func(int, int) reply { return hangUp },
			want:     []probe.Result{probe.Failure, probe.Failure},
			msg:      "EOF",
			wantReqs: []int{1, 1},
		},
		{
			name: "the answer started: not retried",
			script: func(conn, req int) reply {
				if req == 1 {
					return halfAnswer
				}
				return answer
			},
			want:     []probe.Result{probe.Success, probe.Failure},
			msg:      `malformed MIME header: missing colon: "Content-"`,
			wantReqs: []int{2},
		},
		{
			name: "the retry fails too: retried once only",
			script: func(conn, req int) reply {
				if conn == 0 && req == 0 {
					return answer
				}
				return hangUp
			},
			want:     []probe.Result{probe.Success, probe.Failure},
			msg:      "EOF",
			wantReqs: []int{2, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newScriptServer(t, tt.script)
			c := open(t, check.Options{}, s.probe(t))
			var last probe.Outcome
			for i, want := range tt.want {
				last = run(t, c, timeout)
				if last.Result != want {
					t.Fatalf("check %d: %v %q; want %v", i, last.Result, last.Message, want)
				}
			}
			if tt.msg != "" && !strings.Contains(last.Message, tt.msg) {
				t.Errorf("last message %q; want it to contain %q", last.Message, tt.msg)
			}
			eventually(t, "requests per connection", func() bool { return fmt.Sprint(s.requests()) == fmt.Sprint(tt.wantReqs) })
		})
	}
}

// TestHTTPConnectionReuse: a connection is kept for the next check only
// when HTTP allows it and its response was read to the end; a redirect
// to another port of the host keeps one connection per origin.
func TestHTTPConnectionReuse(t *testing.T) {
	t.Parallel()
	other := newRawHTTPServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nother")
	_, otherPort := hostPort(t, other.addr)
	const checks = 4
	tests := []struct {
		name      string
		response  string
		want      probe.Result
		wantMsg   string
		wantConns int
		otherConn int
	}{
		{name: "kept alive", response: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", want: probe.Success, wantMsg: succeeded(200, "2 bytes"), wantConns: 1},
		{name: "a failure's body is read", response: "HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy", want: probe.Failure, wantMsg: `HTTP probe failed with statuscode: 503, body "busy"`, wantConns: 1},
		{name: "chunked", response: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", want: probe.Success, wantMsg: succeeded(200, "2 bytes"), wantConns: 1},
		{name: "Connection: close", response: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", want: probe.Success, wantMsg: succeeded(200, "2 bytes"), wantConns: checks},
		{name: "HTTP/1.0", response: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", want: probe.Success, wantMsg: succeeded(200, "2 bytes"), wantConns: checks},
		{
			name:     "a body over the cap is not read to its end",
			response: "HTTP/1.1 200 OK\r\nContent-Length: 20000\r\n\r\n" + strings.Repeat("b", 20000),
			want:     probe.Success, wantMsg: succeeded(200, fmt.Sprintf("over %d bytes", check.DefaultMaxBodyBytes)), wantConns: checks,
		},
		{
			name:     "redirect to another port",
			response: fmt.Sprintf("HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:%d/\r\nContent-Length: 0\r\n\r\n", otherPort),
			want:     probe.Success, wantMsg: succeeded(200, "5 bytes"), wantConns: 1, otherConn: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newRawHTTPServer(t, tt.response)
			before := other.connections()
			host, port := hostPort(t, s.addr)
			c := open(t, check.Options{}, probe.Handler{HTTPGet: &probe.HTTPGet{Host: host, Port: port}})
			for i := range checks {
				wantOutcome(t, run(t, c, timeout), tt.want, tt.wantMsg, false)
				if t.Failed() {
					t.Fatalf("check %d", i)
				}
			}
			if got := s.connections(); got != tt.wantConns {
				t.Errorf("%d checks used %d connections; want %d", checks, got, tt.wantConns)
			}
			if got := other.connections() - before; got != tt.otherConn {
				t.Errorf("%d checks used %d connections to the other port; want %d", checks, got, tt.otherConn)
			}
		})
	}
}

// rawHTTPServer answers every request with the same raw response, keeping
// the connection open until the client closes it (or the response's own
// framing ends it), and counts connections.
type rawHTTPServer struct {
	addr string
	mu   sync.Mutex
	n    int // guarded by mu
}

func newRawHTTPServer(t *testing.T, response string) *rawHTTPServer {
	t.Helper()
	s := &rawHTTPServer{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.n++
			s.mu.Unlock()
			wg.Go(func() {
				defer func() { _ = c.Close() }()
				r := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(r)
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(response)); err != nil || req.Close ||
						strings.Contains(response, "Connection: close") || strings.HasPrefix(response, "HTTP/1.0") {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = lis.Close()
		wg.Wait()
	})
	return s
}

func (s *rawHTTPServer) connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// TestHTTPRedirectToHTTPS: an HTTP probe redirected to HTTPS on the same
// host follows, with the spec's TLS settings (built when first needed),
// and without the spec's headers (another scheme and port).
func TestHTTPRedirectToHTTPS(t *testing.T) {
	t.Parallel()
	secure, secureRec := newTLSServer(t, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "secure") })
	_, securePort := serverHostPort(t, secure)
	s, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, fmt.Sprintf("https://127.0.0.1:%d/tls", securePort), http.StatusFound)
	})
	tests := []struct {
		name    string
		tls     *probe.TLS
		want    probe.Result
		wantMsg string
	}{
		{name: "verified against the system roots", want: probe.Failure, wantMsg: "certificate"},
		{name: "the spec's TLS settings", tls: &probe.TLS{InsecureSkipVerify: true}, want: probe.Success, wantMsg: succeeded(200, "6 bytes")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := httpGet(t, s, "/")
			g.TLS = tt.tls
			g.Headers = []probe.Header{{Name: "Authorization", Value: "Bearer s3cret"}}
			c := open(t, check.Options{}, probe.Handler{HTTPGet: g})
			for range 2 { // the second reuses both connections
				wantOutcome(t, run(t, c, timeout), tt.want, tt.wantMsg, tt.want == probe.Failure)
			}
		})
	}
	for _, r := range secureRec.requests() {
		if r.URL.Path != "/tls" || r.Header.Get("Authorization") != "" {
			t.Errorf("HTTPS got %s with Authorization %q; want /tls without", r.URL.Path, r.Header.Get("Authorization"))
		}
	}
	if n := len(secureRec.requests()); n != 2 {
		t.Errorf("HTTPS server saw %d requests; want 2", n)
	}
}

// newTLSServer is newServer over TLS (a self-signed certificate).
func newTLSServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *recorder) {
	t.Helper()
	rec := &recorder{h: h}
	s := httptest.NewTLSServer(rec)
	t.Cleanup(s.Close)
	return s, rec
}
