package probe_test

import (
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/probe"
)

var defaultOpts = probe.Options{
	MinPeriod:       probe.DefaultMinPeriod,
	MinTimeout:      probe.DefaultMinTimeout,
	SubSecondProbes: true,
}

func httpProbe() probe.Spec {
	return probe.Spec{Handler: probe.Handler{HTTPGet: &probe.HTTPGet{Host: "127.0.0.1", Port: 8080, Path: "/healthz"}}}
}

func with(mod func(*probe.Spec)) probe.Spec {
	s := httpProbe()
	mod(&s)
	return s
}

// wantErr is one expected field error: its path and a fragment of its text.
type wantErr struct {
	field    string
	contains string
}

func TestValidate(t *testing.T) {
	t.Parallel()
	path := field.NewPath("target").Child("readinessProbe")
	tests := []struct {
		name string
		spec probe.Spec
		typ  *probe.Type
		opts probe.Options
		want []wantErr
	}{
		{name: "minimal http probe is valid", spec: httpProbe()},
		{name: "seed example 1s+500ms is valid", spec: with(func(s *probe.Spec) { s.PeriodSeconds = 1; s.PeriodMilliseconds = ptr[int32](500) })},
		{name: "seed example 1s-900ms = 100ms is exactly the floor", spec: with(func(s *probe.Spec) { s.PeriodSeconds = 1; s.PeriodMilliseconds = ptr[int32](-900) })},
		{name: "seed example 0s(→10s)+500ms is valid", spec: with(func(s *probe.Spec) { s.PeriodMilliseconds = ptr[int32](500) })},
		{name: "seed example timeout 0(→1s)+500ms is valid", spec: with(func(s *probe.Spec) { s.TimeoutMilliseconds = ptr[int32](500) })},
		{name: "milliseconds 999 and -999 are the extremes", spec: with(func(s *probe.Spec) {
			s.PeriodSeconds = 2
			s.PeriodMilliseconds = ptr[int32](-999)
			s.TimeoutMilliseconds = ptr[int32](999)
			s.InitialDelaySeconds = 1
			s.InitialDelayMilliseconds = ptr[int32](-999)
		})},
		{
			name: "milliseconds 1000 is out of range",
			spec: with(func(s *probe.Spec) { s.PeriodMilliseconds = ptr[int32](1000) }),
			want: []wantErr{{"target.readinessProbe.periodMilliseconds", "Invalid value: 1000: must be greater than -1000 and less than 1000"}},
		},
		{
			name: "every milliseconds field is range checked, all reported at once",
			spec: with(func(s *probe.Spec) {
				s.PeriodMilliseconds = ptr[int32](-1000)
				s.TimeoutMilliseconds = ptr[int32](1000)
				s.InitialDelayMilliseconds = ptr[int32](5000)
				s.InitialPeriodMilliseconds = ptr[int32](-2000)
			}),
			want: []wantErr{
				{"target.readinessProbe.initialDelayMilliseconds", "5000"},
				{"target.readinessProbe.timeoutMilliseconds", "1000"},
				{"target.readinessProbe.periodMilliseconds", "-1000"},
				{"target.readinessProbe.initialPeriodMilliseconds", "-2000"},
			},
		},
		{
			name: "negative seconds and thresholds",
			spec: with(func(s *probe.Spec) {
				s.InitialDelaySeconds = -1
				s.TimeoutSeconds = -1
				s.PeriodSeconds = -1
				s.SuccessThreshold = -1
				s.FailureThreshold = -1
				s.InitializationFailureThreshold = ptr[int32](-1)
				s.InitialPeriodSeconds = ptr[int32](-1)
			}),
			want: []wantErr{
				{"target.readinessProbe.initialDelaySeconds", "Invalid value: -1: must be greater than or equal to 0"},
				{"target.readinessProbe.timeoutSeconds", "must be greater than or equal to 0"},
				{"target.readinessProbe.periodSeconds", "must be greater than or equal to 0"},
				{"target.readinessProbe.successThreshold", "must be greater than or equal to 0"},
				{"target.readinessProbe.failureThreshold", "must be greater than or equal to 0"},
				{"target.readinessProbe.initializationFailureThreshold", "must be greater than or equal to 0"},
				{"target.readinessProbe.initialPeriodSeconds", "must be greater than or equal to 0"},
			},
		},
		{
			name: "effective period below the floor",
			spec: with(func(s *probe.Spec) { s.PeriodSeconds = 1; s.PeriodMilliseconds = ptr[int32](-950) }),
			want: []wantErr{{"target.readinessProbe.periodMilliseconds", "effective period periodSeconds 1 + periodMilliseconds -950 = 50ms must be at least 100ms"}},
		},
		{
			name: "a configured floor applies",
			spec: with(func(s *probe.Spec) { s.PeriodSeconds = 1 }),
			opts: probe.Options{MinPeriod: 2 * time.Second, MinTimeout: time.Second, SubSecondProbes: true},
			want: []wantErr{{"target.readinessProbe.periodSeconds", "effective period periodSeconds 1 + periodMilliseconds unset = 1s must be at least 2s"}},
		},
		{
			name: "effective period 0s(→10s) - 999ms stays above the floor",
			spec: with(func(s *probe.Spec) { s.PeriodMilliseconds = ptr[int32](-999) }),
		},
		{
			name: "an invalid timeout does not hide a period below the floor",
			spec: with(func(s *probe.Spec) {
				s.PeriodSeconds = 1
				s.PeriodMilliseconds = ptr[int32](-950)
				s.TimeoutMilliseconds = ptr[int32](1000)
			}),
			want: []wantErr{
				{"target.readinessProbe.timeoutMilliseconds", "Invalid value: 1000"},
				{"target.readinessProbe.periodMilliseconds", "= 50ms must be at least 100ms"},
			},
		},
		{
			name: "effective timeout below the floor",
			spec: with(func(s *probe.Spec) { s.TimeoutSeconds = 1; s.TimeoutMilliseconds = ptr[int32](-901) }),
			want: []wantErr{{"target.readinessProbe.timeoutMilliseconds", "effective timeout timeoutSeconds 1 + timeoutMilliseconds -901 = 99ms must be at least 100ms"}},
		},
		{
			name: "timeout of 0 seconds defaults before the milliseconds are added",
			spec: with(func(s *probe.Spec) { s.TimeoutMilliseconds = ptr[int32](-900) }),
		},
		{
			name: "negative effective initial delay",
			spec: with(func(s *probe.Spec) { s.InitialDelayMilliseconds = ptr[int32](-1) }),
			want: []wantErr{{"target.readinessProbe.initialDelayMilliseconds", "effective initial delay initialDelaySeconds 0 + initialDelayMilliseconds -1 = -1ms must not be negative"}},
		},
		{
			name: "initial period below the floor",
			spec: with(func(s *probe.Spec) { s.InitialPeriodMilliseconds = ptr[int32](50) }),
			want: []wantErr{{"target.readinessProbe.initialPeriodMilliseconds", "= 50ms must be at least 100ms"}},
		},
		{
			name: "initial period of 0 seconds is below the floor (not defaulted)",
			spec: with(func(s *probe.Spec) { s.InitialPeriodSeconds = ptr[int32](0) }),
			want: []wantErr{{"target.readinessProbe.initialPeriodSeconds", "= 0s must be at least 100ms"}},
		},
		{
			name: "gate off: every milliseconds field is rejected naming the gate",
			spec: with(func(s *probe.Spec) {
				s.PeriodMilliseconds = ptr[int32](500)
				s.TimeoutMilliseconds = ptr[int32](0)
				s.InitialDelayMilliseconds = ptr[int32](1)
				s.InitialPeriodMilliseconds = ptr[int32](200)
			}),
			opts: probe.Options{MinPeriod: probe.DefaultMinPeriod, MinTimeout: probe.DefaultMinTimeout},
			want: []wantErr{
				{"target.readinessProbe.initialDelayMilliseconds", "Forbidden: disabled by the SubSecondProbes feature gate"},
				{"target.readinessProbe.timeoutMilliseconds", "SubSecondProbes"},
				{"target.readinessProbe.periodMilliseconds", "SubSecondProbes"},
				{"target.readinessProbe.initialPeriodMilliseconds", "SubSecondProbes"},
			},
		},
		{
			name: "gate off: seconds-only probes stay valid",
			spec: with(func(s *probe.Spec) { s.PeriodSeconds = 1; s.TimeoutSeconds = 1 }),
			opts: probe.Options{MinPeriod: probe.DefaultMinPeriod, MinTimeout: probe.DefaultMinTimeout},
		},
		{
			name: "liveness success threshold must be 1",
			typ:  ptr(probe.Liveness),
			spec: with(func(s *probe.Spec) { s.SuccessThreshold = 2 }),
			want: []wantErr{{"target.readinessProbe.successThreshold", "Invalid value: 2: must be 1 for liveness probes"}},
		},
		{
			name: "startup success threshold must be 1",
			typ:  ptr(probe.Startup),
			spec: with(func(s *probe.Spec) { s.SuccessThreshold = 3 }),
			want: []wantErr{{"target.readinessProbe.successThreshold", "must be 1 for startup probes"}},
		},
		{name: "liveness success threshold 0 defaults to 1", typ: ptr(probe.Liveness), spec: httpProbe()},
		{name: "readiness success threshold may exceed 1", spec: with(func(s *probe.Spec) { s.SuccessThreshold = 3 })},
		{name: "initialization failure threshold below failure threshold is accepted (raised)", spec: with(func(s *probe.Spec) {
			s.FailureThreshold = 5
			s.InitializationFailureThreshold = ptr[int32](1)
		})},
		{
			name: "no handler",
			spec: probe.Spec{},
			want: []wantErr{{"target.readinessProbe", "Required value: must specify a handler type"}},
		},
		{
			name: "two handlers",
			spec: with(func(s *probe.Spec) { s.Handler.TCPSocket = &probe.TCPSocket{Host: "h", Port: 1} }),
			want: []wantErr{{"target.readinessProbe.tcpSocket", "may not specify more than 1 handler type"}},
		},
		{
			name: "http host and port required",
			spec: probe.Spec{Handler: probe.Handler{HTTPGet: &probe.HTTPGet{}}},
			want: []wantErr{
				{"target.readinessProbe.httpGet.host", "Required value"},
				{"target.readinessProbe.httpGet.port", "Required value: a port between 1 and 65535 is required"},
			},
		},
		{
			name: "negative port",
			spec: probe.Spec{Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: "h", Port: -1}}},
			want: []wantErr{{"target.readinessProbe.tcpSocket.port", "Invalid value: -1: must be between 1 and 65535, inclusive"}},
		},
		{
			name: "port above 65535",
			spec: probe.Spec{Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: "h", Port: 65536}}},
			want: []wantErr{{"target.readinessProbe.tcpSocket.port", "65536"}},
		},
		{name: "port 65535 is valid", spec: probe.Spec{Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: "h", Port: 65535}}}},
		{
			name: "host with scheme or port is rejected",
			spec: probe.Spec{Handler: probe.Handler{GRPC: &probe.GRPC{Host: "http://x:80", Port: 1}}},
			want: []wantErr{{"target.readinessProbe.grpc.host", "without scheme, port or path"}},
		},
		{name: "ipv6 host is valid", spec: probe.Spec{Handler: probe.Handler{GRPC: &probe.GRPC{Host: "::1", Port: 9}}}},
		{name: "ipv6 host with a zone is valid", spec: probe.Spec{Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: "fe80::1%eth0", Port: 9}}}},
		{name: "host names are valid", spec: probe.Spec{Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: "web-0.web_svc.default.svc.cluster.local.", Port: 9}}}},
		{
			// Issue 14, item 8: each of these failed on every probe.
			name: "hosts that no probe can reach",
			spec: probe.Spec{Handler: probe.Handler{HTTPGet: &probe.HTTPGet{Host: "127.0.0.1:8080", Port: 80}}},
			want: []wantErr{{"target.readinessProbe.httpGet.host", `Invalid value: "127.0.0.1:8080": must be a host name or IP address`}},
		},
		{name: "a colon", spec: tcpTo(":"), want: []wantErr{{"target.readinessProbe.tcpSocket.host", `Invalid value: ":"`}}},
		{name: "a zone no URL can carry", spec: tcpTo("fe80::1%#0"), want: []wantErr{{"target.readinessProbe.tcpSocket.host", "zone"}}},
		{name: "an empty zone", spec: tcpTo("::1%"), want: []wantErr{{"target.readinessProbe.tcpSocket.host", `Invalid value: "::1%"`}}},
		{name: "an all-numeric name", spec: tcpTo("1234"), want: []wantErr{{"target.readinessProbe.tcpSocket.host", "not all digits"}}},
		{name: "an empty label", spec: tcpTo("a..b"), want: []wantErr{{"target.readinessProbe.tcpSocket.host", "must be a host name"}}},
		{name: "a label ending in a dash", spec: tcpTo("a-.b"), want: []wantErr{{"target.readinessProbe.tcpSocket.host", "must be a host name"}}},
		{name: "a label of 64 bytes", spec: tcpTo(strings.Repeat("a", 64) + ".b"), want: []wantErr{{"target.readinessProbe.tcpSocket.host", "at most 63 bytes each"}}},
		{name: "a control character", spec: tcpTo("a\x1b[31m"), want: []wantErr{{"target.readinessProbe.tcpSocket.host", `Invalid value: "a\x1b[31m"`}}},
		{name: "a non-ASCII name", spec: tcpTo("bücher.example"), want: []wantErr{{"target.readinessProbe.tcpSocket.host", "must be a host name"}}},
		{
			// Issue 14, item 3: they reach this host past a loopback deny list.
			name: "unspecified addresses",
			spec: probe.Spec{Handler: probe.Handler{GRPC: &probe.GRPC{Host: "::ffff:0.0.0.0", Port: 1}}},
			want: []wantErr{{"target.readinessProbe.grpc.host", "must not be an unspecified address (0.0.0.0, ::)"}},
		},
		{name: "0.0.0.0", spec: tcpTo("0.0.0.0"), want: []wantErr{{"target.readinessProbe.tcpSocket.host", "unspecified"}}},
		{name: "::", spec: tcpTo("::"), want: []wantErr{{"target.readinessProbe.tcpSocket.host", "unspecified"}}},
		{name: ":: with a zone", spec: tcpTo("::%lo"), want: []wantErr{{"target.readinessProbe.tcpSocket.host", "unspecified"}}},
		{
			name: "paths that make no request line",
			spec: probe.Spec{Handler: probe.Handler{HTTPGet: &probe.HTTPGet{Host: "h", Port: 80, Path: "/%zz"}}},
			want: []wantErr{{"target.readinessProbe.httpGet.path", `Invalid value: "/%zz": must be a valid URL path and query: invalid URL escape "%zz"`}},
		},
		{
			name: "a path with CR LF",
			spec: probe.Spec{Handler: probe.Handler{HTTPGet: &probe.HTTPGet{Host: "h", Port: 80, Path: "/a\r\nX-Injected: 1"}}},
			want: []wantErr{{"target.readinessProbe.httpGet.path", "invalid control character in URL"}},
		},
		{
			name: "a valid path and query",
			spec: probe.Spec{Handler: probe.Handler{HTTPGet: &probe.HTTPGet{Host: "h", Port: 80, Path: "/a%20b/c?x=1&y=%2F#frag"}}},
		},
		{
			name: "a header value with an escape character",
			spec: probe.Spec{Handler: probe.Handler{HTTPGet: &probe.HTTPGet{Host: "h", Port: 80, Headers: []probe.Header{{Name: "X", Value: "a\x1bb"}, {Name: "Y", Value: "tab\tok"}}}}},
			want: []wantErr{{"target.readinessProbe.httpGet.httpHeaders[0].value", "control characters"}},
		},
		{
			name: "TLS server name and gRPC service bounded",
			spec: probe.Spec{Handler: probe.Handler{GRPC: &probe.GRPC{Host: "h", Port: 1, Service: ptr(strings.Repeat("s", probe.MaxServiceBytes+1)),
				TLS: &probe.TLS{ServerName: "bad name"}}}},
			want: []wantErr{
				{"target.readinessProbe.grpc.service", "Too long: must have at most 1024 bytes"},
				{"target.readinessProbe.grpc.tls.serverName", `Invalid value: "bad name": must be a host name or an IP address`},
			},
		},
		{
			name: "http path, scheme and headers",
			spec: probe.Spec{Handler: probe.Handler{HTTPGet: &probe.HTTPGet{
				Host: "h", Port: 80, Path: "healthz", Scheme: "FTP",
				Headers: []probe.Header{{Name: "", Value: "x"}, {Name: "Bad Name", Value: "v"}, {Name: "X-Ok", Value: "a\r\nb"}},
			}}},
			want: []wantErr{
				{"target.readinessProbe.httpGet.path", `must start with "/"`},
				{"target.readinessProbe.httpGet.scheme", `Invalid value: "FTP": must be HTTP or HTTPS`},
				{"target.readinessProbe.httpGet.httpHeaders[0].name", "Required value"},
				{"target.readinessProbe.httpGet.httpHeaders[1].name", "valid HTTP header name"},
				{"target.readinessProbe.httpGet.httpHeaders[2].value", "must not contain CR, LF, NUL or other control characters but tab"},
			},
		},
		{
			name: "tls with plain http",
			spec: probe.Spec{Handler: probe.Handler{HTTPGet: &probe.HTTPGet{Host: "h", Port: 80, TLS: &probe.TLS{InsecureSkipVerify: true}}}},
			want: []wantErr{{"target.readinessProbe.httpGet.tls", "may only be set with scheme HTTPS"}},
		},
		{
			name: "bad CA bundle",
			spec: probe.Spec{Handler: probe.Handler{HTTPGet: &probe.HTTPGet{Host: "h", Port: 443, Scheme: probe.SchemeHTTPS, TLS: &probe.TLS{CAPEM: "not pem"}}}},
			want: []wantErr{{"target.readinessProbe.httpGet.tls.caPem", "must contain at least one PEM-encoded certificate"}},
		},
		{
			name: "exec refused without --allow-exec",
			spec: probe.Spec{Handler: probe.Handler{Exec: &probe.Exec{Command: []string{"true"}}}},
			want: []wantErr{{"target.readinessProbe.exec", "start probed with --allow-exec"}},
		},
		{
			name: "exec needs a command",
			spec: probe.Spec{Handler: probe.Handler{Exec: &probe.Exec{}}},
			opts: probe.Options{MinPeriod: probe.DefaultMinPeriod, MinTimeout: probe.DefaultMinTimeout, AllowExec: true},
			want: []wantErr{{"target.readinessProbe.exec.command", "Required value"}},
		},
		{
			name: "exec arguments with NUL",
			spec: probe.Spec{Handler: probe.Handler{Exec: &probe.Exec{Command: []string{"true", "ok", "a\x00b"}}}},
			opts: probe.Options{MinPeriod: probe.DefaultMinPeriod, MinTimeout: probe.DefaultMinTimeout, AllowExec: true},
			want: []wantErr{{"target.readinessProbe.exec.command[2]", "must not contain NUL"}},
		},
		{
			name: "exec allowed",
			spec: probe.Spec{Handler: probe.Handler{Exec: &probe.Exec{Command: []string{"true"}}}},
			opts: probe.Options{MinPeriod: probe.DefaultMinPeriod, MinTimeout: probe.DefaultMinTimeout, AllowExec: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := tt.opts
			if opts == (probe.Options{}) {
				opts = defaultOpts
			}
			typ := probe.Readiness
			if tt.typ != nil {
				typ = *tt.typ
			}
			got := tt.spec.Validate(typ, path, opts)
			checkErrors(t, got, tt.want)
		})
	}
}

func tcpTo(host string) probe.Spec {
	return probe.Spec{Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: host, Port: 1}}}
}

// checkErrors asserts that got holds exactly the wanted errors, in order.
func checkErrors(t *testing.T, got field.List, want []wantErr) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(got), len(want), got.Err())
	}
	for i, w := range want {
		if got[i].Field != w.field || !strings.Contains(got[i].Description(), w.contains) {
			t.Errorf("error %d = %q at %q, want %q containing %q", i, got[i].Description(), got[i].Field, w.field, w.contains)
		}
	}
}

func TestUsesMilliseconds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		spec *probe.Spec
		want bool
	}{
		{"nil", nil, false},
		{"none", &probe.Spec{PeriodSeconds: 1}, false},
		{"period", &probe.Spec{PeriodMilliseconds: ptr[int32](0)}, true},
		{"timeout", &probe.Spec{TimeoutMilliseconds: ptr[int32](1)}, true},
		{"initial delay", &probe.Spec{InitialDelayMilliseconds: ptr[int32](1)}, true},
		{"initial period", &probe.Spec{InitialPeriodMilliseconds: ptr[int32](1)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.spec.UsesMilliseconds(); got != tt.want {
				t.Errorf("UsesMilliseconds() = %v, want %v", got, tt.want)
			}
		})
	}
}
