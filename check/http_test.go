package check_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/internal/refused"
)

const timeout = 5 * time.Second // generous: a check that should not time out

// recorder is a handler that records the requests it served.
type recorder struct {
	mu   sync.Mutex
	reqs []*http.Request // guarded by mu
	h    http.HandlerFunc
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req.Clone(context.Background()))
	r.mu.Unlock()
	r.h(w, req)
}

func (r *recorder) requests() []*http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*http.Request(nil), r.reqs...)
}

func newServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *recorder) {
	t.Helper()
	rec := &recorder{h: h}
	s := httptest.NewServer(rec)
	t.Cleanup(s.Close)
	return s, rec
}

func httpGet(t *testing.T, s *httptest.Server, path string) *probe.HTTPGet {
	t.Helper()
	host, port := serverHostPort(t, s)
	return &probe.HTTPGet{Host: host, Port: port, Path: path}
}

func TestHTTPStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code    int
		want    probe.Result
		wantMsg string
	}{
		{code: 200, want: probe.Success, wantMsg: succeeded(200, "6 bytes")},
		{code: 204, want: probe.Success, wantMsg: succeeded(204, "0 bytes")},
		{code: 399, want: probe.Success, wantMsg: "Probe terminated redirects, Response status: 399 status code 399"},
		{code: 400, want: probe.Failure, wantMsg: `HTTP probe failed with statuscode: 400, body "hello"`},
		{code: 503, want: probe.Failure, wantMsg: `HTTP probe failed with statuscode: 503, body "hello"`},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.code), func(t *testing.T) {
			t.Parallel()
			s, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.code)
				if tt.code != 204 {
					fmt.Fprint(w, "hello\n")
				}
			})
			c := open(t, check.Options{}, probe.Handler{HTTPGet: httpGet(t, s, "")})
			out := run(t, c, timeout)
			wantOutcome(t, out, tt.want, tt.wantMsg, false)
		})
	}
}

func TestHTTPExpectedBody(t *testing.T) {
	t.Parallel()
	// Knative's queue-proxy probe: GET /healthz with K-Network-Probe: queue
	// must answer "queue".
	tests := []struct {
		name    string
		body    string
		want    probe.Result
		wantMsg string
	}{
		{name: "match", body: "queue", want: probe.Success, wantMsg: succeeded(200, "5 bytes")},
		{
			name: "mismatch", body: "activator", want: probe.Failure,
			wantMsg: `HTTP probe failed: body "activator" does not match the expected body "queue"`,
		},
		{
			name: "long mismatch", body: strings.Repeat("x", 100), want: probe.Failure,
			wantMsg: `HTTP probe failed: body "` + strings.Repeat("x", 64) + `"... does not match the expected body "queue"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, rec := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/healthz" || r.Header.Get("K-Network-Probe") != "queue" {
					http.Error(w, "not a probe", http.StatusBadRequest)
					return
				}
				fmt.Fprint(w, tt.body)
			})
			g := httpGet(t, s, "/healthz")
			g.Headers = []probe.Header{{Name: "K-Network-Probe", Value: "queue"}}
			g.ExpectedBody = "queue"
			out := run(t, open(t, check.Options{}, probe.Handler{HTTPGet: g}), timeout)
			wantOutcome(t, out, tt.want, tt.wantMsg, false)

			reqs := rec.requests()
			if len(reqs) != 1 {
				t.Fatalf("server saw %d requests; want 1", len(reqs))
			}
			for name, want := range map[string]string{
				"K-Network-Probe": "queue",
				"User-Agent":      check.DefaultUserAgent,
				"Accept":          "*/*",
			} {
				if got := reqs[0].Header.Get(name); got != want {
					t.Errorf("server saw %s = %q; want %q", name, got, want)
				}
			}
			if !strings.HasPrefix(reqs[0].Header.Get("User-Agent"), "probed/") {
				t.Errorf("server saw User-Agent %q; want probed/...", reqs[0].Header.Get("User-Agent"))
			}
		})
	}
}

func TestHTTPHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		opts      check.Options
		headers   []probe.Header
		wantUA    []string // nil: header absent
		wantAcc   []string
		wantHost  string // "" means the server's address
		wantOther map[string]string
	}{
		{name: "defaults", wantUA: []string{"probed/dev"}, wantAcc: []string{"*/*"}},
		{name: "user agent option", opts: check.Options{UserAgent: "probed/1.2"}, wantUA: []string{"probed/1.2"}, wantAcc: []string{"*/*"}},
		{
			name:    "spec overrides",
			headers: []probe.Header{{Name: "user-agent", Value: "custom/1"}, {Name: "Accept", Value: "application/json"}},
			wantUA:  []string{"custom/1"}, wantAcc: []string{"application/json"},
		},
		{
			name:    "empty accept removed",
			headers: []probe.Header{{Name: "Accept", Value: ""}},
			wantUA:  []string{"probed/dev"},
		},
		{
			name:     "host header",
			headers:  []probe.Header{{Name: "Host", Value: "probe.example:8080"}},
			wantUA:   []string{"probed/dev"},
			wantAcc:  []string{"*/*"},
			wantHost: "probe.example:8080",
		},
		{
			name:      "repeated and injected",
			opts:      check.Options{Inject: injectTrace},
			headers:   []probe.Header{{Name: "X-Multi", Value: "a"}, {Name: "x-multi", Value: "b"}},
			wantUA:    []string{"probed/dev"},
			wantAcc:   []string{"*/*"},
			wantOther: map[string]string{"X-Multi": "a,b", "Traceparent": "00-trace-span-01"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, rec := newServer(t, func(http.ResponseWriter, *http.Request) {})
			g := httpGet(t, s, "/")
			g.Headers = tt.headers
			ctx := context.WithValue(t.Context(), traceKey{}, "00-trace-span-01")
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			out := open(t, tt.opts, probe.Handler{HTTPGet: g}).Check(ctx)
			wantOutcome(t, out, probe.Success, succeeded(200, "0 bytes"), false)
			reqs := rec.requests()
			if len(reqs) != 1 {
				t.Fatalf("server saw %d requests; want 1", len(reqs))
			}
			r := reqs[0]
			if got := r.Header.Values("User-Agent"); !equal(got, tt.wantUA) {
				t.Errorf("server saw User-Agent %q; want %q", got, tt.wantUA)
			}
			if got := r.Header.Values("Accept"); !equal(got, tt.wantAcc) {
				t.Errorf("server saw Accept %q; want %q", got, tt.wantAcc)
			}
			wantHost := tt.wantHost
			if wantHost == "" {
				wantHost = s.Listener.Addr().String()
			}
			if r.Host != wantHost {
				t.Errorf("server saw Host %q; want %q", r.Host, wantHost)
			}
			for name, want := range tt.wantOther {
				if got := strings.Join(r.Header.Values(name), ","); got != want {
					t.Errorf("server saw %s = %q; want %q", name, got, want)
				}
			}
			if got := r.Header.Get("Accept-Encoding"); got != "" {
				t.Errorf("server saw Accept-Encoding %q; want none (compression off)", got)
			}
		})
	}
}

type traceKey struct{}

func injectTrace(ctx context.Context, h http.Header) {
	if v, ok := ctx.Value(traceKey{}).(string); ok {
		h.Set("Traceparent", v)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHTTPRedirects(t *testing.T) {
	t.Parallel()
	other, otherRec := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other") })
	_, otherPort := serverHostPort(t, other)
	s, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a":
			http.Redirect(w, r, "/b", http.StatusFound)
		case "/b":
			http.Redirect(w, r, "/c", http.StatusMovedPermanently)
		case "/c":
			fmt.Fprint(w, "arrived")
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/away":
			// Another host name: not followed, as kubelet.
			http.Redirect(w, r, fmt.Sprintf("http://localhost:%d/", otherPort), http.StatusFound)
		}
	})
	tests := []struct {
		path     string
		want     probe.Result
		wantMsg  string
		contains bool
	}{
		{path: "/a", want: probe.Success, wantMsg: succeeded(200, "7 bytes")},
		{path: "/away", want: probe.Success, wantMsg: "Probe terminated redirects, Response status: 302 Found"},
		{path: "/loop", want: probe.Failure, wantMsg: "too many redirects", contains: true},
	}
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(tt.path, "/"), func(t *testing.T) {
			t.Parallel()
			out := run(t, open(t, check.Options{}, probe.Handler{HTTPGet: httpGet(t, s, tt.path)}), timeout)
			wantOutcome(t, out, tt.want, tt.wantMsg, tt.contains)
		})
	}
	t.Cleanup(func() {
		if n := len(otherRec.requests()); n != 0 {
			t.Errorf("the other host saw %d requests; want 0 (redirect not followed)", n)
		}
	})
}

func TestHTTPURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		network   string // listener address
		path      string
		wantPath  string
		wantQuery string
	}{
		{name: "default path", network: "127.0.0.1:0", wantPath: "/"},
		{name: "query", network: "127.0.0.1:0", path: "/healthz?full=1&x=%2F", wantPath: "/healthz", wantQuery: "full=1&x=%2F"},
		{name: "double slash is a path", network: "127.0.0.1:0", path: "//other.example/x", wantPath: "//other.example/x"},
		{name: "escaped", network: "127.0.0.1:0", path: "/a%20b", wantPath: "/a b"},
		{name: "ipv6", network: "[::1]:0", path: "/v6", wantPath: "/v6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, err := net.Listen("tcp", tt.network)
			if err != nil {
				t.Skipf("cannot listen on %s: %v", tt.network, err)
			}
			rec := &recorder{h: func(w http.ResponseWriter, r *http.Request) {}}
			s := httptest.NewUnstartedServer(rec)
			s.Listener.Close()
			s.Listener = l
			s.Start()
			t.Cleanup(s.Close)
			g := httpGet(t, s, tt.path)
			wantOutcome(t, run(t, open(t, check.Options{}, probe.Handler{HTTPGet: g}), timeout), probe.Success, succeeded(200, "0 bytes"), false)
			reqs := rec.requests()
			if len(reqs) != 1 {
				t.Fatalf("server saw %d requests; want 1", len(reqs))
			}
			if u := reqs[0].URL; u.Path != tt.wantPath || u.RawQuery != tt.wantQuery {
				t.Errorf("server saw path %q query %q; want %q, %q", u.Path, u.RawQuery, tt.wantPath, tt.wantQuery)
			}
		})
	}
}

func TestHTTPBodyTruncated(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("a", 3*check.DefaultMaxBodyBytes)
	s, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, big) })
	tests := []struct {
		name     string
		opts     check.Options
		expected string
		wantLen  int // of the body read
	}{
		{name: "default", wantLen: check.DefaultMaxBodyBytes},
		{name: "expected body equals the truncated body", expected: big[:check.DefaultMaxBodyBytes], wantLen: check.DefaultMaxBodyBytes},
		{name: "option", opts: check.Options{MaxBodyBytes: 100}, wantLen: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := httpGet(t, s, "/")
			g.ExpectedBody = tt.expected
			out := run(t, open(t, tt.opts, probe.Handler{HTTPGet: g}), timeout)
			wantOutcome(t, out, probe.Success, succeeded(200, fmt.Sprintf("over %d bytes", tt.wantLen)), false)
		})
	}
}

func TestHTTPKeepAlive(t *testing.T) {
	t.Parallel()
	const probes = 5
	tests := []struct {
		name      string
		disable   bool
		wantConns int64
	}{
		{name: "reused", wantConns: 1},
		{name: "disabled", disable: true, wantConns: probes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var conns atomic.Int64
			s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, "ok")
			}))
			s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					conns.Add(1)
				}
			}
			s.Start()
			t.Cleanup(s.Close)
			g := httpGet(t, s, "/")
			g.DisableKeepAlive = tt.disable
			c := open(t, check.Options{}, probe.Handler{HTTPGet: g})
			for i := range probes {
				out := run(t, c, timeout)
				wantOutcome(t, out, probe.Success, succeeded(200, "2 bytes"), false)
				if i > 0 && !tt.disable && out.Phases.Connect != 0 {
					t.Errorf("probe %d: Connect phase = %v on a reused connection; want 0", i, out.Phases.Connect)
				}
			}
			if got := conns.Load(); got != tt.wantConns {
				t.Errorf("server saw %d connections for %d probes; want %d", got, probes, tt.wantConns)
			}
		})
	}
}

func TestHTTPS(t *testing.T) {
	t.Parallel()
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "secure") }))
	t.Cleanup(s.Close)
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}))
	tests := []struct {
		name     string
		tls      *probe.TLS
		want     probe.Result
		wantMsg  string
		contains bool
	}{
		{name: "system roots", want: probe.Failure, wantMsg: "certificate", contains: true},
		{name: "ca", tls: &probe.TLS{CAPEM: caPEM}, want: probe.Success, wantMsg: succeeded(200, "6 bytes")},
		{name: "insecure", tls: &probe.TLS{InsecureSkipVerify: true}, want: probe.Success, wantMsg: succeeded(200, "6 bytes")},
		{name: "server name in cert", tls: &probe.TLS{CAPEM: caPEM, ServerName: "example.com"}, want: probe.Success, wantMsg: succeeded(200, "6 bytes")},
		{name: "server name not in cert", tls: &probe.TLS{CAPEM: caPEM, ServerName: "wrong.test"}, want: probe.Failure, wantMsg: "wrong.test", contains: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := httpGet(t, s, "/")
			g.Scheme, g.TLS = probe.SchemeHTTPS, tt.tls
			out := run(t, open(t, check.Options{}, probe.Handler{HTTPGet: g}), timeout)
			wantOutcome(t, out, tt.want, tt.wantMsg, tt.contains)
		})
	}
}

func TestHTTPPhases(t *testing.T) {
	t.Parallel()
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	t.Cleanup(s.Close)
	g := httpGet(t, s, "/")
	g.Scheme, g.TLS = probe.SchemeHTTPS, &probe.TLS{InsecureSkipVerify: true}
	c := open(t, check.Options{}, probe.Handler{HTTPGet: g})

	fresh := run(t, c, timeout)
	wantOutcome(t, fresh, probe.Success, succeeded(200, "2 bytes"), false)
	if p := fresh.Phases; p.Connect <= 0 || p.TLS <= 0 || p.FirstByte <= 0 {
		t.Errorf("fresh connection phases = %+v; want Connect, TLS and FirstByte > 0", p)
	}
	if p := fresh.Phases; p.DNS != 0 {
		t.Errorf("fresh connection DNS = %v; want 0 for an IP address", p.DNS)
	}
	if sum := fresh.Phases.Connect + fresh.Phases.TLS + fresh.Phases.FirstByte; sum > fresh.Latency {
		t.Errorf("phases sum to %v, more than the latency %v", sum, fresh.Latency)
	}

	reused := run(t, c, timeout)
	wantOutcome(t, reused, probe.Success, succeeded(200, "2 bytes"), false)
	if p := reused.Phases; p.DNS != 0 || p.Connect != 0 || p.TLS != 0 || p.FirstByte <= 0 {
		t.Errorf("reused connection phases = %+v; want only FirstByte > 0", p)
	}
}

func TestHTTPPhasesDNS(t *testing.T) {
	t.Parallel()
	s, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	_, port := serverHostPort(t, s)
	c := open(t, check.Options{}, probe.Handler{HTTPGet: &probe.HTTPGet{Host: "localhost", Port: port}})
	out := run(t, c, timeout)
	wantOutcome(t, out, probe.Success, succeeded(200, "2 bytes"), false)
	if p := out.Phases; p.DNS <= 0 || p.Connect <= 0 || p.TLS != 0 || p.FirstByte <= 0 {
		t.Errorf("phases for a name = %+v; want DNS, Connect and FirstByte > 0, TLS 0", p)
	}
}

func TestHTTPTransportFailures(t *testing.T) {
	t.Parallel()
	hangHost, hangPort := hangingListener(t)

	t.Run("hanging server", func(t *testing.T) {
		t.Parallel()
		c := open(t, check.Options{}, probe.Handler{HTTPGet: &probe.HTTPGet{Host: hangHost, Port: hangPort}})
		wantDeadline(t, run(t, c, 200*time.Millisecond))
	})
	t.Run("closed port", func(t *testing.T) {
		t.Parallel()
		c := open(t, check.Options{}, probe.Handler{HTTPGet: &probe.HTTPGet{Host: "127.0.0.1", Port: refused.Port(t)}})
		wantOutcome(t, run(t, c, timeout), probe.Failure, "connection refused", true)
	})
	t.Run("policy denies the resolved address", func(t *testing.T) {
		t.Parallel()
		s, rec := newServer(t, func(http.ResponseWriter, *http.Request) {})
		_, port := serverHostPort(t, s)
		opts := check.Options{Policy: &check.Policy{Deny: loopback}}
		c := open(t, opts, probe.Handler{HTTPGet: &probe.HTTPGet{Host: "localhost", Port: port}})
		wantOutcome(t, run(t, c, timeout), probe.Failure, "is denied by the target policy (127.0.0.0/8)", true)
		if n := len(rec.requests()); n != 0 {
			t.Errorf("server saw %d requests; want 0", n)
		}
	})
}
