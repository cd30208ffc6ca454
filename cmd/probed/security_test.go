package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/check"
	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/testpki"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

const (
	aliceToken = "alice-0123456789abcdef"
	bobToken   = "bob-0123456789abcdef00"
)

// pki is a server certificate for the loopback addresses, a CA of client
// certificates and the files holding them.
type pki struct {
	dir                string
	ca, clients, other *testpki.CA
	caFile             string // verifies the server
	certFile, keyFile  string // the server's
	clientCAFile       string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir(), ca: testpki.NewCA(t, "probed-ca"), clients: testpki.NewCA(t, "clients"), other: testpki.NewCA(t, "other")}
	p.caFile = p.ca.WriteCA(t, p.dir, "ca.pem")
	p.certFile, p.keyFile = p.ca.Server(t, "server-1").Write(t, p.dir, "server")
	p.clientCAFile = p.clients.WriteCA(t, p.dir, "clients.pem")
	return p
}

// client writes a client certificate named cn of ca and returns its files.
func (p *pki) client(t *testing.T, ca *testpki.CA, cn string) (certFile, keyFile string) {
	t.Helper()
	return ca.Client(t, cn).Write(t, p.dir, "client-"+cn)
}

func (p *pki) tlsArgs(args ...string) []string {
	return append([]string{"--tls-cert", p.certFile, "--tls-key", p.keyFile}, args...)
}

func tokenFile(t *testing.T, lines ...string) string {
	t.Helper()
	return testpki.WriteFile(t, t.TempDir(), "tokens", []byte(strings.Join(lines, "\n")+"\n"))
}

func dialClient(t *testing.T, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.Dial(t.Context(), addr, opts...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func plainTarget(name string) *probev1.Target { return &probev1.Target{Name: name} }

func tcpTarget(name, host string, port int32) *probev1.Target {
	return &probev1.Target{Name: name, ReadinessProbe: &probev1.Probe{
		Handler:       &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: host, Port: port}},
		PeriodSeconds: 1,
	}}
}

func port(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

func TestSecurityFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "loopback without security", args: []string{"--addr", "127.0.0.1:50051"}},
		{name: "localhost without security", args: []string{"--addr", "localhost:50051"}},
		{name: "IPv6 loopback without security", args: []string{"--addr", "[::1]:50051"}},
		{name: "every interface without security", args: []string{"--addr", ":50051"}, wantErr: "--addr :50051 is not a loopback address and neither TLS"},
		{name: "0.0.0.0 without security", args: []string{"--addr", "0.0.0.0:50051"}, wantErr: "pass --insecure to accept that"},
		{name: "IPv6 any without security", args: []string{"--addr", "[::]:50051"}, wantErr: "not a loopback address"},
		{name: "a name without security", args: []string{"--addr", "probed.example:50051"}, wantErr: "not a loopback address"},
		{name: "insecure", args: []string{"--addr", "0.0.0.0:50051", "--insecure"}},
		{name: "tokens only", args: []string{"--addr", "0.0.0.0:50051", "--auth-token-file", "tokens"}},
		{name: "TLS only", args: []string{"--addr", "0.0.0.0:50051", "--tls-cert", "c", "--tls-key", "k"}},
		{name: "mutual TLS", args: []string{"--addr", "0.0.0.0:50051", "--tls-cert", "c", "--tls-key", "k", "--client-ca", "ca"}},
		{name: "cert without key", args: []string{"--tls-cert", "c"}, wantErr: "--tls-cert and --tls-key go together"},
		{name: "client CA without TLS", args: []string{"--client-ca", "ca"}, wantErr: "--client-ca needs --tls-cert"},
		{name: "bad CIDR", args: []string{"--deny-targets", "10.0.0.0/33"}, wantErr: `"10.0.0.0/33" is not a CIDR prefix`},
		{name: "host bits", args: []string{"--allow-targets", "10.1.2.3/8"}, wantErr: "did you mean 10.0.0.0/8?"},
		{name: "not an address", args: []string{"--allow-targets", "example.com"}, wantErr: "neither a CIDR prefix nor an IP address"},
		{name: "negative watchers", args: []string{"--max-watchers", "-1"}, wantErr: "--max-watchers"},
		{name: "negative watchers per client", args: []string{"--max-watchers-per-client", "-1"}, wantErr: "--max-watchers-per-client -1"},
		{name: "tiny requests", args: []string{"--max-request-bytes", "10"}, wantErr: "--max-request-bytes"},
		{name: "negative rate", args: []string{"--registrations-per-second", "-1"}, wantErr: "--registrations-per-second"},
		{name: "zero burst", args: []string{"--registrations-burst", "0"}, wantErr: "--registrations-burst"},
		{name: "zero reload interval", args: []string{"--reload-interval", "0s"}, wantErr: "--reload-interval"},
		{name: "zero streams per connection", args: []string{"--max-streams-per-connection", "0"}, wantErr: "--max-streams-per-connection"},
		{name: "negative connections per IP", args: []string{"--max-connections-per-ip", "-1"}, wantErr: "--max-connections-per-ip -1"},
		{name: "negative first-call timeout", args: []string{"--first-call-timeout", "-1s"}, wantErr: "--first-call-timeout -1s"},
		{name: "connection bounds off", args: []string{"--max-connections", "0", "--max-connections-per-ip", "0", "--max-unauthenticated-connections", "0", "--first-call-timeout", "0", "--connection-idle-timeout", "0"}},
		{name: "a policy without authentication", args: []string{"--authz-policy", "p.yaml"}, wantErr: "--authz-policy needs authentication"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("parseFlags(%v) = %v", tt.args, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("parseFlags(%v) error = %v, want it to contain %q", tt.args, err, tt.wantErr)
			}
		})
	}
}

func TestSecurityFlagDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sc := cfg.security
	if !slices.Equal(sc.denyTargets.prefixList, check.DefaultDeny()) || len(sc.allowTargets) != 0 {
		t.Errorf("policy = allow %v deny %v, want allow all but check.DefaultDeny()", sc.allowTargets, sc.denyTargets)
	}
	if cfg.maxTargets != 100_000 || sc.maxWatchers != 1000 || sc.watchersPerClient() != 250 || sc.maxStreamsPerConnection != 100 || sc.maxRequestBytes != 1<<20 ||
		sc.registrationsPerSecond != 100 || sc.registrationsBurst != 200 || sc.maxTargetsPerClient != 0 || !sc.openHealth {
		t.Errorf("defaults: max-targets %d, %+v", cfg.maxTargets, sc)
	}
	cfg, err = parseFlags([]string{"--deny-targets", "none", "--allow-targets", "10.0.0.0/8, 192.168.1.1 ,fd00::/8", "--exec-allowlist", "/bin/true, pg_isready"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.1/32"), netip.MustParsePrefix("fd00::/8")}
	if !slices.Equal(cfg.security.allowTargets, want) || len(cfg.security.denyTargets.prefixList) != 0 {
		t.Errorf("allow %v deny %v, want allow %v, deny nothing", cfg.security.allowTargets, cfg.security.denyTargets, want)
	}
	if got := []string(cfg.security.execAllowlist); !slices.Equal(got, []string{"/bin/true", "pg_isready"}) {
		t.Errorf("exec allowlist = %q", got)
	}
}

// TestDenyTargetsNeverEmptyByAccident: an empty --deny-targets (which
// would let probes reach the cloud metadata addresses) is refused, on
// the command line and in a file; "none" denies nothing deliberately,
// and probed warns at start when the policy lets probes reach a metadata
// address.
func TestDenyTargetsNeverEmptyByAccident(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--deny-targets", ""}, {"--deny-targets", " , "}, {"--config", writeConfig(t, "deny-targets: []\n")}, {"--config", writeConfig(t, "deny-targets: ''\n")}} {
		if _, err := parseFlags(args, io.Discard); err == nil || !strings.Contains(err.Error(), "--deny-targets=none") {
			t.Errorf("parseFlags(%q) = %v, want an error saying --deny-targets=none", args, err)
		}
	}
	cfg, err := parseFlags([]string{"--deny-targets", "none"}, io.Discard)
	if err != nil || len(cfg.security.denyTargets.prefixList) != 0 || cfg.security.denyTargets.String() != "none" {
		t.Fatalf("--deny-targets none = %v (%v), want an empty list shown as none", cfg.security.denyTargets.prefixList, err)
	}
	for _, tt := range []struct {
		args []string
		warn bool
	}{
		{nil, false},
		{[]string{"--deny-targets", "none"}, true},
		{[]string{"--deny-targets", "10.0.0.0/8"}, true},
		{[]string{"--deny-targets", "none", "--allow-targets", "10.0.0.0/8"}, false},
		{[]string{"--deny-targets", "169.254.169.254/32,fd00:ec2::254/128,100.100.100.200/32"}, false},
	} {
		cfg, err := parseFlags(tt.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		sec, err := newSecurity(cfg, slog.New(slog.NewTextHandler(&log, nil)))
		if err != nil {
			t.Fatal(err)
		}
		sec.close()
		if got := strings.Contains(log.String(), "cloud metadata address"); got != tt.warn {
			t.Errorf("%q: warned about metadata addresses %v, want %v; log:\n%s", tt.args, got, tt.warn, log.String())
		}
	}
}

func TestWatchersPerClientDefault(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want int
	}{
		{name: "default", want: 250},
		{name: "a quarter of --max-watchers", args: []string{"--max-watchers", "40"}, want: 10},
		{name: "at least one", args: []string{"--max-watchers", "3"}, want: 1},
		{name: "no --max-watchers: no limit", args: []string{"--max-watchers", "0"}, want: 0},
		{name: "set", args: []string{"--max-watchers", "40", "--max-watchers-per-client", "30"}, want: 30},
		{name: "set to no limit", args: []string{"--max-watchers-per-client", "0"}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := parseFlags(tt.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.security.watchersPerClient(); got != tt.want {
				t.Errorf("watchers per client with %q = %d, want %d", tt.args, got, tt.want)
			}
		})
	}
	if _, err := parseFlags([]string{"--max-watchers-per-client", "x"}, io.Discard); err == nil {
		t.Error("--max-watchers-per-client x: no error")
	}
}

func TestNonLoopbackStartsWithInsecure(t *testing.T) {
	t.Parallel()
	if _, err := parseFlags([]string{"--addr", "0.0.0.0:0", "--data-dir", t.TempDir()}, io.Discard); err == nil {
		t.Fatal("a non-loopback address without TLS or authentication was accepted")
	}
	addr := startServer(t, testConfig(t, "--addr", "0.0.0.0:0", "--insecure"))
	c := dialClient(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port(t, addr)))))
	if _, err := c.Create(callCtx(t), plainTarget("web")); err != nil {
		t.Fatalf("Create: %v", err)
	}
}

func TestTLSOnly(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	addr := startServer(t, testConfig(t, p.tlsArgs()...))
	c := dialClient(t, addr, client.WithTLS(p.caFile))
	if _, err := c.Create(callCtx(t), plainTarget("web")); err != nil {
		t.Fatalf("Create over TLS: %v", err)
	}
	if _, err := c.Get(callCtx(t), "web"); err != nil {
		t.Fatalf("Get over TLS: %v", err)
	}
	if _, err := dialClient(t, addr).Get(callCtx(t), "web"); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("plaintext client: %v, want ErrUnavailable", err)
	}
	wrongCA := p.other.WriteCA(t, p.dir, "other.pem")
	if _, err := dialClient(t, addr, client.WithTLS(wrongCA)).Get(callCtx(t), "web"); !errors.Is(err, client.ErrUnavailable) ||
		!strings.Contains(err.Error(), "certificate") {
		t.Errorf("client trusting another CA: %v, want ErrUnavailable about the certificate", err)
	}
}

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	addr := startServer(t, testConfig(t, p.tlsArgs("--client-ca", p.clientCAFile, "--max-targets-per-client", "1")...))
	aliceCert, aliceKey := p.client(t, p.clients, "alice")
	bobCert, bobKey := p.client(t, p.clients, "bob")
	malCert, malKey := p.client(t, p.other, "mallory")

	alice := dialClient(t, addr, client.WithTLS(p.caFile), client.WithClientCert(aliceCert, aliceKey))
	if _, err := alice.Create(callCtx(t), plainTarget("a1")); err != nil {
		t.Fatalf("alice's first create: %v", err)
	}
	// The certificate's CN is the identity that owns targets.
	_, err := alice.Create(callCtx(t), plainTarget("a2"))
	if !errors.Is(err, client.ErrResourceExhausted) || !strings.Contains(err.Error(), `"alice" already has 1 targets`) {
		t.Fatalf("alice's second create: %v, want ResourceExhausted naming alice", err)
	}
	bob := dialClient(t, addr, client.WithClientCert(bobCert, bobKey), client.WithTLS(p.caFile))
	if _, err := bob.Create(callCtx(t), plainTarget("b1")); err != nil {
		t.Fatalf("bob's create: %v", err)
	}

	rejected := []struct {
		name string
		opts []client.Option
	}{
		{name: "no client certificate", opts: []client.Option{client.WithTLS(p.caFile)}},
		{name: "certificate of another CA", opts: []client.Option{client.WithTLS(p.caFile), client.WithClientCert(malCert, malKey)}},
		{name: "plaintext", opts: nil},
	}
	for _, tt := range rejected {
		if _, err := dialClient(t, addr, tt.opts...).Get(callCtx(t), "a1"); !errors.Is(err, client.ErrUnavailable) {
			t.Errorf("%s: %v, want the connection refused (ErrUnavailable)", tt.name, err)
		}
	}
}

// rawConn dials addr over TLS trusting p's CA.
func rawConn(t *testing.T, addr string, p *pki) *grpc.ClientConn {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func withToken(ctx context.Context, tok string) context.Context {
	if tok == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

// firstWatch opens a Watch and returns the code of its first receive.
func firstWatch(ctx context.Context, conn *grpc.ClientConn, tok string) codes.Code {
	ctx, cancel := context.WithCancel(withToken(ctx, tok))
	defer cancel()
	s, err := probev1.NewProbeServiceClient(conn).Watch(ctx, &probev1.WatchRequest{})
	if err != nil {
		return status.Code(err)
	}
	_, err = s.Recv()
	return status.Code(err)
}

func reflectList(ctx context.Context, conn *grpc.ClientConn, tok string) codes.Code {
	ctx, cancel := context.WithCancel(withToken(ctx, tok))
	defer cancel()
	s, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return status.Code(err)
	}
	// A stream the server refused may fail Send with io.EOF; its status
	// is what Recv returns.
	_ = s.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	_, err = s.Recv()
	return status.Code(err)
}

func TestTokenAuthentication(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	tokens := tokenFile(t, "# probed clients", aliceToken+" alice", bobToken)
	addr := startServer(t, testConfig(t, p.tlsArgs("--auth-token-file", tokens)...))
	conn := rawConn(t, addr, p)
	svc := probev1.NewProbeServiceClient(conn)
	ctx := callCtx(t)

	create := func(tok, name string) codes.Code {
		_, err := svc.CreateTarget(withToken(ctx, tok), &probev1.CreateTargetRequest{Target: plainTarget(name)})
		return status.Code(err)
	}
	tests := []struct {
		name string
		got  func() codes.Code
		want codes.Code
	}{
		{name: "unary with a token", got: func() codes.Code { return create(aliceToken, "a") }, want: codes.OK},
		{name: "unary with an unnamed token", got: func() codes.Code { return create(bobToken, "b") }, want: codes.OK},
		{name: "unary without a token", got: func() codes.Code { return create("", "c") }, want: codes.Unauthenticated},
		{name: "unary with a wrong token", got: func() codes.Code { return create(aliceToken+"0", "d") }, want: codes.Unauthenticated},
		{name: "stream with a token", got: func() codes.Code { return firstWatch(ctx, conn, aliceToken) }, want: codes.OK},
		{name: "stream without a token", got: func() codes.Code { return firstWatch(ctx, conn, "") }, want: codes.Unauthenticated},
		{name: "stream with a wrong token", got: func() codes.Code { return firstWatch(ctx, conn, bobToken+"0") }, want: codes.Unauthenticated},
		{name: "health is open", got: func() codes.Code {
			_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			return status.Code(err)
		}, want: codes.OK},
		{name: "reflection without a token", got: func() codes.Code { return reflectList(ctx, conn, "") }, want: codes.Unauthenticated},
		{name: "reflection with a token", got: func() codes.Code { return reflectList(ctx, conn, aliceToken) }, want: codes.OK},
	}
	for _, tt := range tests {
		if got := tt.got(); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}

	// The Go client: a token over TLS.
	c := dialClient(t, addr, client.WithTLS(p.caFile), client.WithToken(aliceToken))
	if _, err := c.Get(callCtx(t), "a"); err != nil {
		t.Errorf("client with a token: %v", err)
	}
	if _, err := dialClient(t, addr, client.WithTLS(p.caFile)).Get(callCtx(t), "a"); !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("client without a token: %v, want ErrUnauthenticated", err)
	}
}

func TestClosedHealth(t *testing.T) {
	t.Parallel()
	tokens := tokenFile(t, aliceToken+" alice")
	addr := startServer(t, testConfig(t, "--auth-token-file", tokens, "--open-health=false"))
	c := dialClient(t, addr) // plaintext on loopback
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h := healthpb.NewHealthClient(conn)
	if _, err := h.Check(callCtx(t), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("health without a token: %v, want Unauthenticated", err)
	}
	if _, err := h.Check(withToken(callCtx(t), aliceToken), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health with a token: %v", err)
	}
	if _, err := c.Create(callCtx(t), plainTarget("a")); !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("create without a token: %v, want ErrUnauthenticated", err)
	}
}

// serverCN returns the common name of the certificate addr presents to a
// new connection.
func serverCN(t *testing.T, addr string, p *pki) string {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}, ServerName: "localhost"})
	if err != nil {
		t.Fatalf("TLS dial: %v", err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, 10*time.Second, cond)
}

func TestCredentialsReloadWithoutRestart(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	tokens := tokenFile(t, aliceToken+" alice")
	addr := startServer(t, testConfig(t, p.tlsArgs("--auth-token-file", tokens, "--reload-interval", "50ms")...))
	if cn := serverCN(t, addr, p); cn != "server-1" {
		t.Fatalf("server certificate %q, want server-1", cn)
	}
	alice := dialClient(t, addr, client.WithTLS(p.caFile), client.WithToken(aliceToken))
	if _, err := alice.Create(callCtx(t), plainTarget("a")); err != nil {
		t.Fatal(err)
	}

	// Rotate the certificate: key first, then the certificate, as a
	// careless rotation would; the server keeps serving the old one
	// until both match.
	next := p.ca.Server(t, "server-2")
	testpki.WriteFile(t, p.dir, "server.key", next.KeyPEM)
	// For three reload intervals (50 ms): a reload that took the
	// mismatched pair would have shown by then.
	poll.Every(50*time.Millisecond).Holds(t, "the old certificate served with a mismatched key", 150*time.Millisecond, func() string {
		if cn := serverCN(t, addr, p); cn != "server-1" {
			return "the server presents " + cn
		}
		return ""
	})
	testpki.WriteFile(t, p.dir, "server.crt", next.CertPEM)
	eventually(t, "the new certificate served", func() bool { return serverCN(t, addr, p) == "server-2" })
	if _, err := alice.Get(callCtx(t), "a"); err != nil {
		t.Errorf("existing client after the rotation: %v", err)
	}

	// Rotate the tokens: bob in, alice out. Her watch ends.
	wctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := alice.Watch(wctx)
	if r := <-events; r.Err != nil {
		t.Fatal(r.Err)
	}
	testpki.WriteFile(t, filepath.Dir(tokens), filepath.Base(tokens), []byte(bobToken+" bob\n"))
	bob := dialClient(t, addr, client.WithTLS(p.caFile), client.WithToken(bobToken))
	eventually(t, "the new token accepted", func() bool { _, err := bob.Get(callCtx(t), "a"); return err == nil })
	if _, err := alice.Get(callCtx(t), "a"); !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("removed token: %v, want ErrUnauthenticated", err)
	}
	timeout := time.After(10 * time.Second)
	for ended := false; !ended; {
		select {
		case r := <-events:
			if r.Err != nil {
				if !errors.Is(r.Err, client.ErrUnauthenticated) {
					t.Errorf("watch with a removed token ended with %v, want ErrUnauthenticated", r.Err)
				}
				ended = true
			}
		case <-timeout:
			t.Fatal("watch with a removed token still open 10s after the rotation")
		}
	}
}

func TestTargetPolicy(t *testing.T) {
	t.Parallel()
	addr := startServer(t, testConfig(t))
	c := dialClient(t, addr)
	_, err := c.Create(callCtx(t), &probev1.Target{Name: "metadata", ReadinessProbe: &probev1.Probe{
		Handler: &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "169.254.169.254", Port: 80, Path: "/latest/meta-data/"}},
	}})
	var inv *client.InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("Create of a metadata probe: %v, want an InvalidError", err)
	}
	want := []client.FieldViolation{{
		Field:       "target.readinessProbe.httpGet.host",
		Description: `Invalid value: "169.254.169.254": address 169.254.169.254 is denied by the target policy (169.254.0.0/16)`,
	}}
	if diff := cmp.Diff(want, inv.Violations); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
	if _, err := c.Create(callCtx(t), tcpTarget("self", "127.0.0.1", port(t, addr))); err != nil {
		t.Errorf("loopback is allowed by default: %v", err)
	}
}

func TestTargetPolicyAtDialTime(t *testing.T) {
	t.Parallel()
	addr := startServer(t, testConfig(t, "--deny-targets", "127.0.0.0/8,::1"))
	c := dialClient(t, addr)
	if _, err := c.Create(callCtx(t), tcpTarget("literal", "127.0.0.1", port(t, addr))); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("denied literal address: %v, want ErrInvalid", err)
	}
	// A name is checked when it resolves: the probe fails saying why.
	if _, err := c.Create(callCtx(t), tcpTarget("name", "localhost", port(t, addr))); err != nil {
		t.Fatalf("Create with a name: %v", err)
	}
	resp, err := c.Trigger(callCtx(t), "name", probev1.ProbeType_PROBE_TYPE_READINESS)
	if err != nil {
		t.Fatal(err)
	}
	if out := resp.GetOutcome(); out.GetResult() != probev1.Result_RESULT_FAILURE || !strings.Contains(out.GetMessage(), "is denied by the target policy (127.0.0.0/8)") {
		t.Errorf("probe of a name resolving to a denied address: %v %q", out.GetResult(), out.GetMessage())
	}
}

func TestAllowTargets(t *testing.T) {
	t.Parallel()
	addr := startServer(t, testConfig(t, "--allow-targets", "10.0.0.0/8"))
	_, err := dialClient(t, addr).Create(callCtx(t), tcpTarget("self", "127.0.0.1", port(t, addr)))
	var inv *client.InvalidError
	if !errors.As(err, &inv) || len(inv.Violations) != 1 || inv.Violations[0].Description != `Invalid value: "127.0.0.1": address 127.0.0.1 is not allowed by the target policy` {
		t.Fatalf("Create outside --allow-targets: %v", err)
	}
}

func TestExecAllowlist(t *testing.T) {
	t.Parallel()
	addr := startServer(t, testConfig(t, "--allow-exec", "--exec-allowlist", "true"))
	c := dialClient(t, addr)
	exec := func(name string, cmd ...string) *probev1.Target {
		return &probev1.Target{Name: name, LivenessProbe: &probev1.Probe{
			Handler: &probev1.Probe_Exec{Exec: &probev1.ExecAction{Command: cmd}},
		}}
	}
	_, err := c.Create(callCtx(t), exec("no", "false"))
	var inv *client.InvalidError
	if !errors.As(err, &inv) || len(inv.Violations) != 1 || inv.Violations[0].Field != "target.livenessProbe.exec.command[0]" {
		t.Fatalf("Create of a command not allowlisted: %v, want a field error on exec.command[0]", err)
	}
	if _, err := c.Create(callCtx(t), exec("yes", "true")); err != nil {
		t.Fatalf("Create of an allowlisted command: %v", err)
	}
}

func TestRegistrationRateLimit(t *testing.T) {
	t.Parallel()
	tokens := tokenFile(t, aliceToken+" alice", bobToken+" bob")
	addr := startServer(t, testConfig(t, "--auth-token-file", tokens, "--registrations-per-second", "0.01", "--registrations-burst", "2"))
	alice := dialClient(t, addr, client.WithToken(aliceToken))
	for i := range 2 {
		if _, err := alice.Create(callCtx(t), plainTarget("a"+strconv.Itoa(i))); err != nil {
			t.Fatalf("create %d within the burst: %v", i, err)
		}
	}
	_, err := alice.Create(callCtx(t), plainTarget("a2"))
	if !errors.Is(err, client.ErrResourceExhausted) || !strings.Contains(err.Error(), "--registrations-per-second 0.01") {
		t.Fatalf("create beyond the burst: %v, want ResourceExhausted naming the flag", err)
	}
	if _, err := alice.Update(callCtx(t), &probev1.Target{Name: "a0", Labels: map[string]string{"x": "y"}}); !errors.Is(err, client.ErrResourceExhausted) {
		t.Errorf("update beyond the burst: %v, want ResourceExhausted", err)
	}
	if _, err := alice.Get(callCtx(t), "a0"); err != nil {
		t.Errorf("reads are not limited: %v", err)
	}
	if _, err := dialClient(t, addr, client.WithToken(bobToken)).Create(callCtx(t), plainTarget("b0")); err != nil {
		t.Errorf("another client is not limited by alice's calls: %v", err)
	}
}

func TestMaxWatchers(t *testing.T) {
	t.Parallel()
	addr := startServer(t, testConfig(t, "--max-watchers", "1"))
	c := dialClient(t, addr)
	ctx, cancel := context.WithCancel(t.Context())
	first := c.Watch(ctx)
	if r := <-first; r.Err != nil || !r.SnapshotComplete {
		t.Fatalf("first watch: %+v", r)
	}
	second := c.Watch(t.Context())
	r := <-second
	if !errors.Is(r.Err, client.ErrResourceExhausted) || !strings.Contains(r.Err.Error(), "--max-watchers") {
		t.Fatalf("second watch: %+v, want ErrResourceExhausted naming --max-watchers", r)
	}
	cancel()
	for range first {
	}
	eventually(t, "a watch once the first ended", func() bool {
		wctx, wcancel := context.WithCancel(t.Context())
		defer wcancel()
		r := <-c.Watch(wctx)
		return r.Err == nil
	})
}

func TestMaxRequestBytes(t *testing.T) {
	t.Parallel()
	addr := startServer(t, testConfig(t, "--max-request-bytes", "2048"))
	labels := make(map[string]string)
	for i := range 40 {
		labels["label-"+strconv.Itoa(i)] = strings.Repeat("v", 60)
	}
	_, err := dialClient(t, addr).Create(callCtx(t), &probev1.Target{Name: "big", Labels: labels})
	if !errors.Is(err, client.ErrResourceExhausted) {
		t.Fatalf("Create of a %d-label target: %v, want ResourceExhausted", len(labels), err)
	}
}

// TestGoClientOverMutualTLSWithTokenFile drives the Go client the way an
// operator would run it: TLS verified against the CA, a client
// certificate, a token file; calls, Watch and WaitReady.
func TestGoClientOverMutualTLSWithTokenFile(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	tokens := tokenFile(t, aliceToken+" alice")
	addr := startServer(t, testConfig(t, p.tlsArgs("--client-ca", p.clientCAFile, "--auth-token-file", tokens)...))
	certFile, keyFile := p.client(t, p.clients, "alice-host")
	clientToken := testpki.WriteFile(t, t.TempDir(), "token", []byte(aliceToken+"\n"))
	c := dialClient(t, addr, client.WithTLS(p.caFile), client.WithClientCert(certFile, keyFile), client.WithTokenFile(clientToken))

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := c.Watch(ctx)
	if r := <-events; r.Err != nil || !r.SnapshotComplete {
		t.Fatalf("watch: %+v", r)
	}
	if _, err := c.Create(callCtx(t), tcpTarget("self", "127.0.0.1", port(t, addr))); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, err := c.WaitReady(callCtx(t), "self"); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	var kinds []probev1.EventKind
	for len(kinds) < 2 {
		r := <-events
		if r.Err != nil {
			t.Fatalf("watch: %v", r.Err)
		}
		for _, ev := range r.Events {
			kinds = append(kinds, ev.GetKind())
		}
	}
	if kinds[0] != probev1.EventKind_EVENT_KIND_CREATED || kinds[1] != probev1.EventKind_EVENT_KIND_TRANSITION {
		t.Errorf("events %v, want CREATED then TRANSITION", kinds)
	}
	if _, err := c.Delete(callCtx(t), "self"); err != nil {
		t.Errorf("Delete: %v", err)
	}
	// The same client without the token file is refused.
	noToken := dialClient(t, addr, client.WithTLS(p.caFile), client.WithClientCert(certFile, keyFile))
	if _, err := noToken.Get(callCtx(t), "self"); !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("client without its token: %v, want ErrUnauthenticated", err)
	}
	if err := os.Remove(clientToken); err != nil {
		t.Fatal(err)
	}
}

// TestHostileEndpointCannotBreakTheAPI: a probed server answering with a
// status line that is not UTF-8 (quoted in the probe's message) must not
// make the target unreadable or break Watch streams (proto strings must be
// valid UTF-8, or marshaling fails).
func TestHostileEndpointCannotBreakTheAPI(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = lis.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 4096)
			_, _ = c.Read(buf)
			_, _ = c.Write([]byte("HTTP/1.1 300 \xf1\xff\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			_ = c.Close()
		}
	}()
	addr := startServer(t, testConfig(t))
	c := dialClient(t, addr)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := c.Watch(ctx)
	if r := <-events; r.Err != nil {
		t.Fatal(r.Err)
	}
	_, err = c.Create(callCtx(t), &probev1.Target{Name: "hostile", ReadinessProbe: &probev1.Probe{
		Handler:       &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "127.0.0.1", Port: port(t, lis.Addr().String())}},
		PeriodSeconds: 1,
	}})
	if err != nil {
		t.Fatal(err)
	}
	tg, err := c.WaitReady(callCtx(t), "hostile")
	if err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	if msg := tg.GetStatus().GetReadiness().GetLastMessage(); msg != "Probe terminated redirects, Response status: 300 \uFFFD" {
		t.Errorf("last message %q", msg)
	}
	for {
		r := <-events
		if r.Err != nil {
			t.Fatalf("watch: %v", r.Err)
		}
		if slices.ContainsFunc(r.Events, func(ev *probev1.Event) bool { return ev.GetKind() == probev1.EventKind_EVENT_KIND_TRANSITION }) {
			break
		}
	}
}
