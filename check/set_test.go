package check_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
)

var _ engine.Checkers = (*check.Set)(nil)

func TestMain(m *testing.M) {
	if os.Getenv(remoteEnv) != "" {
		os.Exit(serveRemote())
	}
	goleak.VerifyTestMain(m)
}

func TestOpen(t *testing.T) {
	t.Parallel()
	okHTTP := &probe.HTTPGet{Host: "127.0.0.1", Port: 80}
	tests := []struct {
		name    string
		opts    check.Options
		h       probe.Handler
		wantErr error  // errors.Is target; nil with wantMsg "" means success
		wantMsg string // substring of the error
	}{
		{name: "http", h: probe.Handler{HTTPGet: okHTTP}},
		{name: "tcp", h: probe.Handler{TCPSocket: &probe.TCPSocket{Host: "127.0.0.1", Port: 80}}},
		{name: "grpc", h: probe.Handler{GRPC: &probe.GRPC{Host: "::1", Port: 80}}},
		{name: "exec allowed", opts: check.Options{AllowExec: true}, h: probe.Handler{Exec: &probe.Exec{Command: []string{"true"}}}},
		{name: "no handler", wantErr: check.ErrHandler},
		{
			name:    "two handlers",
			h:       probe.Handler{HTTPGet: okHTTP, TCPSocket: &probe.TCPSocket{Host: "127.0.0.1", Port: 80}},
			wantErr: check.ErrHandler,
		},
		{
			name:    "exec disabled",
			h:       probe.Handler{Exec: &probe.Exec{Command: []string{"true"}}},
			wantErr: check.ErrExecDisabled,
			wantMsg: "exec probes are disabled; start probed with --allow-exec",
		},
		{
			name:    "exec not in allowlist",
			opts:    check.Options{AllowExec: true, ExecAllowlist: []string{"/bin/true"}},
			h:       probe.Handler{Exec: &probe.Exec{Command: []string{"true"}}},
			wantErr: check.ErrExecNotAllowed,
			wantMsg: `exec.command "true": command is not in the exec allowlist`,
		},
		{
			name: "exec in allowlist",
			opts: check.Options{AllowExec: true, ExecAllowlist: []string{"/bin/false", "/bin/true"}},
			h:    probe.Handler{Exec: &probe.Exec{Command: []string{"/bin/true"}}},
		},
		{
			name:    "exec empty command",
			opts:    check.Options{AllowExec: true},
			h:       probe.Handler{Exec: &probe.Exec{}},
			wantMsg: "a command is required",
		},
		{
			name:    "http bad scheme",
			h:       probe.Handler{HTTPGet: &probe.HTTPGet{Host: "127.0.0.1", Port: 80, Scheme: "FTP"}},
			wantMsg: "httpGet.scheme",
		},
		{
			name:    "https bad CA",
			h:       probe.Handler{HTTPGet: &probe.HTTPGet{Host: "127.0.0.1", Port: 443, Scheme: probe.SchemeHTTPS, TLS: &probe.TLS{CAPEM: "junk"}}},
			wantMsg: "caPem",
		},
		{
			name:    "grpc bad CA",
			h:       probe.Handler{GRPC: &probe.GRPC{Host: "127.0.0.1", Port: 443, TLS: &probe.TLS{CAPEM: "junk"}}},
			wantMsg: "caPem",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := check.New(tt.opts).Open("target", probe.Readiness, tt.h)
			if tt.wantErr == nil && tt.wantMsg == "" {
				if err != nil || c == nil {
					t.Fatalf("Open() = %v, %v; want a checker, nil", c, err)
				}
				c.Close()
				return
			}
			if err == nil || c != nil {
				t.Fatalf("Open() = %v, %v; want nil, an error", c, err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Open() error = %v; want one wrapping %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Open() error = %q; want it to contain %q", err, tt.wantMsg)
			}
		})
	}
}

// open opens h with opts and closes the checker when the test ends.
func open(t *testing.T, opts check.Options, h probe.Handler) engine.Checker {
	t.Helper()
	c, err := check.New(opts).Open("target", probe.Readiness, h)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// run runs one check with a deadline of d.
func run(t *testing.T, c engine.Checker, d time.Duration) probe.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	out := c.Check(ctx)
	if out.Latency <= 0 {
		t.Errorf("Check() latency = %v; want > 0", out.Latency)
	}
	return out
}

// wantOutcome fails t unless out has result want and a message equal to
// msg (or, with contains, holding it).
// succeeded is the message of a successful HTTP probe: the status and the
// size of the body (size: "5 bytes", "over 10240 bytes").
func succeeded(code int, size string) string {
	return fmt.Sprintf("HTTP %d, %s", code, size)
}

func wantOutcome(t *testing.T, out probe.Outcome, want probe.Result, msg string, contains bool) {
	t.Helper()
	if out.Result != want {
		t.Errorf("Check() result = %v (message %q); want %v", out.Result, out.Message, want)
	}
	if contains && !strings.Contains(out.Message, msg) || !contains && out.Message != msg {
		t.Errorf("Check() message = %q; want %s %q", out.Message, map[bool]string{true: "one containing", false: "exactly"}[contains], msg)
	}
}

// hostPort splits the address of an httptest server (or any "host:port").
func hostPort(t testing.TB, addr string) (string, int32) {
	t.Helper()
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		addr = u.Host
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return h, int32(n)
}

func serverHostPort(t *testing.T, s *httptest.Server) (string, int32) {
	t.Helper()
	return hostPort(t, s.URL)
}

// hangingListener accepts connections and never answers; they are closed
// when the test ends.
func hangingListener(t *testing.T) (string, int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
	})
	return hostPort(t, l.Addr().String())
}

// wantDeadline fails t unless out is a Failure whose message mentions the
// deadline.
func wantDeadline(t *testing.T, out probe.Outcome) {
	t.Helper()
	if out.Result != probe.Failure {
		t.Errorf("Check() result = %v (message %q); want failure", out.Result, out.Message)
	}
	if m := strings.ToLower(out.Message); !strings.Contains(m, "deadline") && !strings.Contains(m, "timeout") {
		t.Errorf("Check() message = %q; want one mentioning the deadline", out.Message)
	}
}
