package check_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/refused"
)

// The tests in this file play hostile probe targets: servers that never
// finish a handshake, answer with endless or huge headers, huge status
// messages, or redirect a probe's credentials elsewhere. Whatever they
// do, a check ends by its deadline, closes what it opened, and returns a
// bounded message.

// eventually fails t unless cond holds within 5 s. It waits for an
// effect; it asserts nothing about speed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, 5*time.Second, cond)
}

// TestHandshakeThatNeverEndsIsBounded: a target that accepts TCP
// connections and never finishes the TLS handshake (or the HTTP/2
// preface) used to keep one socket, and its goroutines, per probe: the
// HTTP transport had no handshake timeout and its dial outlived the
// probe; gRPC connected under its own 20 s deadline. Each check now ends
// by its deadline and closes the connection it opened; a shared gRPC
// channel holds one connection, the one it is establishing, whatever the
// number of checks, until its checker closes.
func TestHandshakeThatNeverEndsIsBounded(t *testing.T) {
	t.Parallel()
	const checks = 8
	perProbe := check.Options{GRPCDialPerProbe: true}
	tests := []struct {
		name    string
		opts    check.Options
		handler func(host string, port int32) probe.Handler
		held    int64 // connections a checker may keep open between checks
	}{
		{name: "HTTPS", handler: func(host string, port int32) probe.Handler {
			return probe.Handler{HTTPGet: &probe.HTTPGet{Host: host, Port: port, Scheme: probe.SchemeHTTPS}}
		}},
		{name: "HTTPS without keep-alive", handler: func(host string, port int32) probe.Handler {
			return probe.Handler{HTTPGet: &probe.HTTPGet{Host: host, Port: port, Scheme: probe.SchemeHTTPS, DisableKeepAlive: true}}
		}},
		{name: "gRPC, a channel per check", opts: perProbe, handler: func(host string, port int32) probe.Handler {
			return probe.Handler{GRPC: &probe.GRPC{Host: host, Port: port}}
		}},
		{name: "gRPC over TLS, a channel per check", opts: perProbe, handler: func(host string, port int32) probe.Handler {
			return probe.Handler{GRPC: &probe.GRPC{Host: host, Port: port, TLS: &probe.TLS{}}}
		}},
		{name: "gRPC, a shared channel", held: 1, handler: func(host string, port int32) probe.Handler {
			return probe.Handler{GRPC: &probe.GRPC{Host: host, Port: port}}
		}},
		{name: "gRPC over TLS, a shared channel", held: 1, handler: func(host string, port int32) probe.Handler {
			return probe.Handler{GRPC: &probe.GRPC{Host: host, Port: port, TLS: &probe.TLS{}}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := probedtest.NewHolding(t)
			host, port := hostPort(t, h.Addr)
			c := open(t, tt.opts, tt.handler(host, port))
			for i := range checks {
				out := run(t, c, 100*time.Millisecond)
				if out.Result != probe.Failure {
					t.Fatalf("check %d: %v %q; want a failure", i, out.Result, out.Message)
				}
			}
			// Every connection is closed by the end of its check (a leak
			// kept them all until the process ran out of descriptors).
			eventually(t, fmt.Sprintf("%d connections still open after %d checks", h.Open(), checks),
				func() bool { return h.Open() <= tt.held })
			c.Close()
			eventually(t, fmt.Sprintf("%d connections still open after Close", h.Open()),
				func() bool { return h.Open() == 0 })
		})
	}
}

// TestHTTPEndlessHeaders: a target answering with endless headers used to
// be read up to net/http's 10 MB default per probe (20 such targets: +200
// MB, and a healthy probe slowed). The header is capped at
// Options.MaxHeaderBytes: the probe fails, having allocated a bounded
// amount. Not parallel: it measures the allocations of the process.
func TestHTTPEndlessHeaders(t *testing.T) {
	line := "X-Endless: " + strings.Repeat("a", 1000)
	host, port := hostPort(t, probedtest.HeaderServer(t, "HTTP/1.1 200 OK", func(int) string { return line }))
	c := open(t, check.Options{}, probe.Handler{HTTPGet: &probe.HTTPGet{Host: host, Port: port}})
	const checks = 10
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range checks {
		out := run(t, c, timeout)
		if out.Result != probe.Failure || len(out.Message) > probe.MaxMessageBytes {
			t.Fatalf("check %d: %v %.100q (%d bytes); want a failure with a bounded message", i, out.Result, out.Message, len(out.Message))
		}
	}
	runtime.ReadMemStats(&after)
	// Unbounded, each check reads (and allocates) ~10 MB of header.
	const limit = checks * 1 << 20
	if got := after.TotalAlloc - before.TotalAlloc; got > limit {
		t.Errorf("%d checks of an endless header allocated %d bytes; want at most %d", checks, got, limit)
	}
}

func TestHTTPHostileStatusAndHeaders(t *testing.T) {
	t.Parallel()
	none := func(int) string { return "" }
	tests := []struct {
		name       string
		statusLine string
		headers    func(int) string
		want       probe.Result
		prefix     string // of the message
		truncated  bool
	}{
		{
			name:       "a reason phrase longer than a message",
			statusLine: "HTTP/1.1 300 " + strings.Repeat("r", 12<<10),
			headers:    none,
			want:       probe.Success,
			prefix:     "Probe terminated redirects, Response status: 300 rrr",
			truncated:  true,
		},
		{
			name:       "a status line longer than the header cap",
			statusLine: "HTTP/1.1 300 " + strings.Repeat("r", 1<<20),
			headers:    none,
			want:       probe.Failure,
		},
		{
			name:       "headers just under the cap",
			statusLine: "HTTP/1.1 200 OK",
			headers: func(i int) string {
				if i < 14 {
					return fmt.Sprintf("X-H%d: %s", i, strings.Repeat("v", 1000))
				}
				return ""
			},
			want: probe.Success,
		},
		{
			name:       "headers over the cap",
			statusLine: "HTTP/1.1 200 OK",
			headers: func(i int) string {
				if i < 20 {
					return fmt.Sprintf("X-H%d: %s", i, strings.Repeat("v", 1000))
				}
				return ""
			},
			want: probe.Failure,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			host, port := hostPort(t, probedtest.HeaderServer(t, tt.statusLine, tt.headers))
			out := run(t, open(t, check.Options{}, probe.Handler{HTTPGet: &probe.HTTPGet{Host: host, Port: port}}), timeout)
			if out.Result != tt.want || len(out.Message) > probe.MaxMessageBytes || !strings.HasPrefix(out.Message, tt.prefix) ||
				strings.HasSuffix(out.Message, probe.TruncatedSuffix) != tt.truncated {
				t.Errorf("Check() = %v, %d bytes %.80q; want %v, at most %d bytes, starting %q, truncated %v",
					out.Result, len(out.Message), out.Message, tt.want, probe.MaxMessageBytes, tt.prefix, tt.truncated)
			}
		})
	}
}

func TestGRPCHostileStatusMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		size      int
		truncated bool
	}{
		{name: "longer than a message", size: 12 << 10, truncated: true},
		{name: "8 MiB", size: 8 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			host, port := hostPort(t, probedtest.FailingHealthServer(t, strings.Repeat("m", tt.size)))
			out := run(t, open(t, check.Options{}, probe.Handler{GRPC: &probe.GRPC{Host: host, Port: port}}), timeout)
			if out.Result != probe.Failure || len(out.Message) > probe.MaxMessageBytes ||
				strings.HasSuffix(out.Message, probe.TruncatedSuffix) != tt.truncated {
				t.Errorf("Check() = %v, %d bytes %.100q; want a failure of at most %d bytes, truncated %v",
					out.Result, len(out.Message), out.Message, probe.MaxMessageBytes, tt.truncated)
			}
		})
	}
}

// TestHTTPRedirectKeepsCredentialsHome: the spec's headers (an
// Authorization, an API key) follow a redirect only when the scheme, host
// and port stay the same; net/http alone forwards them to another port of
// the same host.
func TestHTTPRedirectKeepsCredentialsHome(t *testing.T) {
	t.Parallel()
	other, otherRec := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other port") })
	_, otherPort := serverHostPort(t, other)
	s, rec := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/same":
			http.Redirect(w, r, "/final", http.StatusFound)
		case "/port":
			http.Redirect(w, r, fmt.Sprintf("http://127.0.0.1:%d/", otherPort), http.StatusFound)
		default:
			fmt.Fprint(w, "final")
		}
	})
	secret := []probe.Header{{Name: "Authorization", Value: "Bearer s3cret"}, {Name: "x-api-key", Value: "k3y"}}
	probeOf := func(path string) probe.Handler {
		g := httpGet(t, s, path)
		g.Host = "127.0.0.1"
		g.Headers = secret
		return probe.Handler{HTTPGet: g}
	}
	wantOutcome(t, run(t, open(t, check.Options{}, probeOf("/same")), timeout), probe.Success, succeeded(200, "5 bytes"), false)
	wantOutcome(t, run(t, open(t, check.Options{UserAgent: "probed/test"}, probeOf("/port")), timeout), probe.Success, succeeded(200, "10 bytes"), false)

	for _, r := range rec.requests() {
		if r.Header.Get("Authorization") != "Bearer s3cret" || r.Header.Get("X-Api-Key") != "k3y" {
			t.Errorf("%s on the probed origin: headers %v; want the spec's", r.URL.Path, r.Header)
		}
	}
	reqs := otherRec.requests()
	if len(reqs) != 1 {
		t.Fatalf("the other port saw %d requests; want 1", len(reqs))
	}
	h := reqs[0].Header
	if h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" || h.Get("Referer") != "" {
		t.Errorf("another port of the same host got the spec's credentials: %v", h)
	}
	if h.Get("User-Agent") != "probed/test" || h.Get("Accept") != "*/*" {
		t.Errorf("another port of the same host: headers %v; want probed's defaults", h)
	}
}

// TestHTTPQueryRedacted: a probe URL's query often carries a secret; the
// messages (published, stored, logged) show its keys only.
func TestHTTPQueryRedacted(t *testing.T) {
	t.Parallel()
	closed := refused.Port(t)
	s, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, fmt.Sprintf("http://127.0.0.1:%d/next?key=r3dir&b", closed), http.StatusFound)
	})
	tests := []struct {
		name string
		g    *probe.HTTPGet
		want string
	}{
		{
			name: "the probe URL",
			g:    &probe.HTTPGet{Host: "127.0.0.1", Port: closed, Path: "/health?token=s3cret&flag#frag"},
			want: fmt.Sprintf(`Get "http://127.0.0.1:%d/health?token=REDACTED&REDACTED": dial tcp`, closed),
		},
		{
			name: "a redirect's URL",
			g:    func() *probe.HTTPGet { g := httpGet(t, s, "/"); g.Host = "127.0.0.1"; return g }(),
			want: fmt.Sprintf(`Get "http://127.0.0.1:%d/next?key=REDACTED&REDACTED": dial tcp`, closed),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := run(t, open(t, check.Options{}, probe.Handler{HTTPGet: tt.g}), timeout)
			wantOutcome(t, out, probe.Failure, tt.want, true)
			for _, secret := range []string{"s3cret", "r3dir", "flag", "frag"} {
				if strings.Contains(out.Message, secret) {
					t.Errorf("message %q shows %q", out.Message, secret)
				}
			}
		})
	}
}

// TestUnspecifiedAddressRefused: 0.0.0.0 and :: reach this host (past a
// deny list of its loopback addresses); the dial refuses them whatever
// the policy says.
func TestUnspecifiedAddressRefused(t *testing.T) {
	t.Parallel()
	port := refused.Port(t) // nothing listens; a connect would be refused rather than denied
	for _, host := range []string{"0.0.0.0", "::", "::ffff:0.0.0.0"} {
		for _, opts := range []check.Options{{}, {Policy: &check.Policy{Deny: loopback}}} {
			out := run(t, open(t, opts, probe.Handler{TCPSocket: &probe.TCPSocket{Host: host, Port: port}}), timeout)
			wantOutcome(t, out, probe.Failure, "is unspecified (it means this host), never a probe target", true)
		}
	}
}

// TestHostileTextIsEscaped: what a target sends that enters a probe's
// message — a reason phrase, a body, a gRPC status message, a command's
// output — has its control characters escaped (probe.BoundMessage):
// messages reach pod conditions, logs, terminals and the status page,
// where an escape sequence would act.
func TestHostileTextIsEscaped(t *testing.T) {
	t.Parallel()
	const hostile = "\x1b[2J\x1b]0;pwned\a\u009b31m\u202e"
	body := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, hostile) }))
	t.Cleanup(body.Close)
	hostHeader, portHeader := hostPort(t, probedtest.HeaderServer(t, "HTTP/1.1 300 "+hostile, func(int) string { return "" }))
	hostBody, portBody := hostPort(t, body.Listener.Addr().String())
	hostGRPC, portGRPC := hostPort(t, probedtest.FailingHealthServer(t, hostile))
	tests := []struct {
		name string
		h    probe.Handler
	}{
		{"an HTTP reason phrase", probe.Handler{HTTPGet: &probe.HTTPGet{Host: hostHeader, Port: portHeader}}},
		{"an HTTP body that is not the one expected", probe.Handler{HTTPGet: &probe.HTTPGet{Host: hostBody, Port: portBody, ExpectedBody: "ready"}}},
		{"a gRPC status message", probe.Handler{GRPC: &probe.GRPC{Host: hostGRPC, Port: portGRPC}}},
		{"a command's output", probe.Handler{Exec: &probe.Exec{Command: []string{"printf", strings.ReplaceAll(hostile, "%", "%%")}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := run(t, open(t, check.Options{AllowExec: true}, tt.h), timeout)
			if i := strings.IndexFunc(out.Message, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }); i >= 0 {
				t.Errorf("message %q: a control character at %d", out.Message, i)
			}
			if !strings.Contains(out.Message, "pwned") {
				t.Errorf("message %q does not show what the target sent", out.Message)
			}
		})
	}
}
