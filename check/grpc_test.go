package check_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/internal/refused"
)

// countingListener counts the connections it accepts, and those still
// open.
type countingListener struct {
	net.Listener
	n    atomic.Int64
	open atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.n.Add(1)
	l.open.Add(1)
	return &countedConn{Conn: c, open: &l.open}, nil
}

// countedConn decrements open when it is first closed.
type countedConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}

// grpcServer serves gRPC on l (a new loopback listener when nil), with the
// health service when withHealth; it stops when the test ends.
func grpcServer(t *testing.T, l net.Listener, withHealth bool, opts ...grpc.ServerOption) (*countingListener, *health.Server) {
	t.Helper()
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	cl := &countingListener{Listener: l}
	s := grpc.NewServer(opts...)
	var hs *health.Server
	if withHealth {
		hs = health.NewServer()
		hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
		hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
		healthpb.RegisterHealthServer(s, hs)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(cl)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	return cl, hs
}

func grpcProbe(t *testing.T, l net.Listener, service *string, tlsCfg *probe.TLS) *probe.GRPC {
	t.Helper()
	host, port := hostPort(t, l.Addr().String())
	return &probe.GRPC{Host: host, Port: port, Service: service, TLS: tlsCfg}
}

func ptr[T any](v T) *T { return &v }

func TestGRPC(t *testing.T) {
	t.Parallel()
	healthy, _ := grpcServer(t, nil, true)
	bare, _ := grpcServer(t, nil, false)
	hangHost, hangPort := hangingListener(t)
	tests := []struct {
		name     string
		opts     check.Options
		g        *probe.GRPC
		deadline time.Duration
		want     probe.Result
		wantMsg  string
		contains bool
	}{
		{name: "serving", g: grpcProbe(t, healthy, nil, nil), want: probe.Success, wantMsg: "service healthy"},
		{name: "serving named empty", g: grpcProbe(t, healthy, ptr(""), nil), want: probe.Success, wantMsg: "service healthy"},
		{
			name: "not serving", g: grpcProbe(t, healthy, ptr("db"), nil), want: probe.Failure,
			wantMsg: `service unhealthy (responded with "NOT_SERVING")`,
		},
		{
			name: "unknown service", g: grpcProbe(t, healthy, ptr("nope"), nil), want: probe.Failure,
			wantMsg: "error: health rpc failed: rpc error: code = NotFound desc = unknown service",
		},
		{
			name: "no health service", g: grpcProbe(t, bare, nil, nil), want: probe.Failure,
			wantMsg: "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): unknown service grpc.health.v1.Health",
		},
		{
			name: "hanging server", g: &probe.GRPC{Host: hangHost, Port: hangPort},
			deadline: 200 * time.Millisecond, want: probe.Failure, wantMsg: "deadline", contains: true,
		},
		{
			name: "policy denies the address", opts: check.Options{Policy: &check.Policy{Deny: loopback}},
			g: grpcProbe(t, healthy, nil, nil), deadline: 2 * time.Second, want: probe.Failure,
			wantMsg: "address 127.0.0.1 is denied by the target policy (127.0.0.0/8)", contains: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := tt.deadline
			if d == 0 {
				d = timeout
			}
			out := run(t, open(t, tt.opts, probe.Handler{GRPC: tt.g}), d)
			wantOutcome(t, out, tt.want, tt.wantMsg, tt.contains)
		})
	}
}

// grpcModes are the two ways gRPC checkers connect.
var grpcModes = []struct {
	name string
	opts check.Options
}{
	{name: "shared channel"},
	{name: "channel per check", opts: check.Options{GRPCDialPerProbe: true}},
}

// TestGRPCRefusedFailsFast: a check of a port that refuses connections
// fails as soon as the connection is refused, with "connection refused"
// (code Unavailable), not when its deadline passes ("probe timed out",
// DeadlineExceeded), and so does every later check. The deadline here is
// far beyond what a refusal takes: a check that waited for it would fail
// on its message.
func TestGRPCRefusedFailsFast(t *testing.T) {
	t.Parallel()
	port := refused.Port(t)
	for _, mode := range grpcModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			c := open(t, mode.opts, probe.Handler{GRPC: &probe.GRPC{Host: "127.0.0.1", Port: port}})
			for i := range 3 {
				out := run(t, c, 30*time.Second)
				if out.Result != probe.Failure || !strings.Contains(out.Message, "code = Unavailable") || !strings.Contains(out.Message, "connection refused") {
					t.Fatalf("check %d: %v %q; want a failure, Unavailable, connection refused", i, out.Result, out.Message)
				}
			}
		})
	}
}

// TestGRPCChannelPerCheck: with GRPCDialPerProbe, each check dials its
// own channel and closes it (kubelet's way): a gRPC probe holds no
// connection, and no goroutine, between checks. Every check sees the
// server's current status.
func TestGRPCChannelPerCheck(t *testing.T) {
	t.Parallel()
	l, hs := grpcServer(t, nil, true)
	c := open(t, check.Options{GRPCDialPerProbe: true}, probe.Handler{GRPC: grpcProbe(t, l, nil, nil)})
	statuses := []healthpb.HealthCheckResponse_ServingStatus{
		healthpb.HealthCheckResponse_SERVING,
		healthpb.HealthCheckResponse_NOT_SERVING,
		healthpb.HealthCheckResponse_SERVING,
	}
	for i, st := range statuses {
		hs.SetServingStatus("", st)
		out := run(t, c, timeout)
		if want := st == healthpb.HealthCheckResponse_SERVING; (out.Result == probe.Success) != want {
			t.Errorf("check %d with %v: result %v (%q); want success = %v", i, st, out.Result, out.Message, want)
		}
	}
	if n := l.n.Load(); n != int64(len(statuses)) {
		t.Errorf("server accepted %d connections for %d checks; want one each", n, len(statuses))
	}
	eventually(t, "connections closed after the checks", func() bool { return l.open.Load() == 0 })
}

// TestGRPCSharedChannel: by default the checkers of a Set that probe one
// address with the same TLS settings share one connection, kept between
// checks; other TLS settings or another Set get their own; the last
// checker of a channel closes its connection. Every check sees the
// server's current status.
func TestGRPCSharedChannel(t *testing.T) {
	t.Parallel()
	l, hs := grpcServer(t, nil, true)
	set := check.New(check.Options{})
	g := grpcProbe(t, l, nil, nil)
	var cs []engine.Checker
	for _, h := range []probe.Handler{
		{GRPC: g},
		{GRPC: &probe.GRPC{Host: g.Host, Port: g.Port, Service: ptr("db")}}, // another service: the same channel
		{GRPC: g},
	} {
		c, err := set.Open("target", probe.Readiness, h)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	statuses := []healthpb.HealthCheckResponse_ServingStatus{
		healthpb.HealthCheckResponse_SERVING,
		healthpb.HealthCheckResponse_NOT_SERVING,
		healthpb.HealthCheckResponse_SERVING,
	}
	for i, st := range statuses {
		hs.SetServingStatus("", st)
		for j, c := range []engine.Checker{cs[0], cs[2]} {
			out := run(t, c, timeout)
			if want := st == healthpb.HealthCheckResponse_SERVING; (out.Result == probe.Success) != want {
				t.Errorf("check %d of checker %d with %v: result %v (%q); want success = %v", i, j, st, out.Result, out.Message, want)
			}
		}
		wantOutcome(t, run(t, cs[1], timeout), probe.Failure, `service unhealthy (responded with "NOT_SERVING")`, false)
	}
	if n := l.n.Load(); n != 1 {
		t.Errorf("server accepted %d connections for one shared channel; want 1", n)
	}
	other := open(t, check.Options{}, probe.Handler{GRPC: g}) // another Set
	wantOutcome(t, run(t, other, timeout), probe.Success, "service healthy", false)
	if n := l.n.Load(); n != 2 {
		t.Errorf("server accepted %d connections for two Sets; want 2", n)
	}
	other.Close()
	eventually(t, "the other Set's connection closed", func() bool { return l.open.Load() == 1 })
	cs[0].Close()
	cs[1].Close()
	if n := l.open.Load(); n != 1 {
		t.Errorf("%d connections open while a checker holds the channel; want 1", n)
	}
	cs[2].Close()
	eventually(t, "the shared connection closed with its last checker", func() bool { return l.open.Load() == 0 })
}

// TestGRPCRecovers: a check after the target came back succeeds at once,
// in both modes: a channel that failed to connect backs off for about a
// second before it redials, and a check must not wait for that (nor fail
// with the channel's last error). A shared channel whose server went away
// reconnects at the next check.
func TestGRPCRecovers(t *testing.T) {
	t.Parallel()
	for _, mode := range grpcModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			reserved := refused.Reserve(t)
			c := open(t, mode.opts, probe.Handler{GRPC: &probe.GRPC{Host: "127.0.0.1", Port: reserved.Port}})
			wantOutcome(t, run(t, c, 2*time.Second), probe.Failure, "connection refused", true)

			stop := serveGRPCHealth(t, reserved.Listen(t))
			wantOutcome(t, run(t, c, 500*time.Millisecond), probe.Success, "service healthy", false)

			// The server goes away: a shared channel's first check may still
			// be sent on the connection it had (and fail with
			// "error reading from server: EOF"); the next one redials and is
			// refused. Then the server is back.
			stop()
			if out := run(t, c, 2*time.Second); out.Result != probe.Failure {
				t.Fatalf("check after the server stopped: %v %q; want a failure", out.Result, out.Message)
			}
			wantOutcome(t, run(t, c, 2*time.Second), probe.Failure, "connection refused", true)
			serveGRPCHealth(t, reserved.Listen(t))
			wantOutcome(t, run(t, c, 500*time.Millisecond), probe.Success, "service healthy", false)
		})
	}
}

// serveGRPCHealth serves a SERVING health service on l until stop is
// called or the test ends; stop closes every connection.
func serveGRPCHealth(t *testing.T, l net.Listener) (stop func()) {
	t.Helper()
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(l)
	}()
	stop = sync.OnceFunc(func() {
		s.Stop()
		<-done
	})
	t.Cleanup(stop)
	return stop
}

func TestGRPCTLS(t *testing.T) {
	t.Parallel()
	cert, caPEM := selfSigned(t)
	l, _ := grpcServer(t, nil, true, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	tests := []struct {
		name     string
		tls      *probe.TLS
		deadline time.Duration
		want     probe.Result
		wantMsg  string
		contains bool
	}{
		{name: "ca", tls: &probe.TLS{CAPEM: caPEM}, want: probe.Success, wantMsg: "service healthy"},
		{name: "insecure", tls: &probe.TLS{InsecureSkipVerify: true}, want: probe.Success, wantMsg: "service healthy"},
		{name: "server name", tls: &probe.TLS{CAPEM: caPEM, ServerName: "probe.test"}, want: probe.Success, wantMsg: "service healthy"},
		{
			// The check waits for a connection until its deadline (kubelet's
			// blocking dial); the handshake's error must reach the channel
			// before it, also on a loaded machine under the race detector.
			name: "system roots", tls: &probe.TLS{}, deadline: 2 * time.Second,
			want: probe.Failure, wantMsg: "certificate", contains: true,
		},
		{
			name: "wrong server name", tls: &probe.TLS{CAPEM: caPEM, ServerName: "wrong.test"}, deadline: 2 * time.Second,
			want: probe.Failure, wantMsg: "wrong.test", contains: true,
		},
		{
			name: "plaintext to TLS", deadline: 300 * time.Millisecond,
			want: probe.Failure, wantMsg: "error: health rpc failed", contains: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := tt.deadline
			if d == 0 {
				d = timeout
			}
			out := run(t, open(t, check.Options{}, probe.Handler{GRPC: grpcProbe(t, l, nil, tt.tls)}), d)
			wantOutcome(t, out, tt.want, tt.wantMsg, tt.contains)
		})
	}
}

// selfSigned returns a self-signed ECDSA certificate for 127.0.0.1, ::1 and
// probe.test, and its PEM.
func selfSigned(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "probe.test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		DNSNames:              []string{"probe.test"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
