package auth_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/testpki"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/server/auth"
)

const reflectionMethod = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"

// longStream is a method the echo server keeps open until the call ends.
const longStream = "/test.Long/Stream"

// startEcho serves health and, for every other method, a handler that
// answers with the caller's identity (engine.ClientFrom) in the trailer
// "owner", over TLS with certs when not nil. It returns the address.
func startEcho(t *testing.T, a *auth.Authenticator, certs *auth.Certs) string {
	t.Helper()
	opts := a.ServerOptions()
	if certs != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(certs.TLSConfig())))
	}
	opts = append(opts, grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		ss.SetTrailer(metadata.Pairs("owner", engine.ClientFrom(ss.Context())))
		var m emptypb.Empty
		if err := ss.RecvMsg(&m); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if err := ss.SendMsg(&emptypb.Empty{}); err != nil {
			return err
		}
		if m, _ := grpc.MethodFromServerStream(ss); m == longStream {
			<-ss.Context().Done()
			return status.FromContextError(ss.Context().Err()).Err()
		}
		return nil
	}))
	g := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(g, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

// call invokes method with an optional bearer token and returns the
// identity the server saw.
func call(t *testing.T, conn *grpc.ClientConn, method, token string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	var trailer metadata.MD
	err := conn.Invoke(ctx, method, &emptypb.Empty{}, &emptypb.Empty{}, grpc.Trailer(&trailer))
	if v := trailer.Get("owner"); len(v) > 0 {
		return v[0], err
	}
	return "", err
}

// stream opens a server stream of method and reads until its end.
func stream(t *testing.T, conn *grpc.ClientConn, method, token string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		return "", err
	}
	if err := s.SendMsg(&emptypb.Empty{}); err != nil {
		return "", err
	}
	_ = s.CloseSend()
	for {
		if err := s.RecvMsg(&emptypb.Empty{}); err != nil {
			owner := ""
			if v := s.Trailer().Get("owner"); len(v) > 0 {
				owner = v[0]
			}
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return owner, err
		}
	}
}

func dial(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func tokens(t *testing.T, data string) *auth.Tokens {
	t.Helper()
	toks, err := auth.LoadTokens(testpki.WriteFile(t, t.TempDir(), "tokens", []byte(data)))
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

func TestAnonymousWithoutAuthentication(t *testing.T) {
	t.Parallel()
	conn := dial(t, startEcho(t, auth.New(auth.Options{}), nil), nil)
	if id, err := call(t, conn, probev1.ProbeService_GetTarget_FullMethodName, ""); err != nil || id != "anonymous@127.0.0.1" {
		t.Fatalf("identity = %q, %v; want anonymous@127.0.0.1 (the caller's host)", id, err)
	}
}

func TestAnonymousAt(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ addr, want string }{
		{"127.0.0.1:5000", "anonymous@127.0.0.1"},
		{"[::1]:5000", "anonymous@::1"},
		{"10.0.0.7", "anonymous@10.0.0.7"},
		{"", "anonymous"},
	} {
		if got := auth.AnonymousAt(tt.addr); got != tt.want {
			t.Errorf("AnonymousAt(%q) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

func TestTokenAuthentication(t *testing.T) {
	t.Parallel()
	toks := tokens(t, tokA+" alice\n")
	tests := []struct {
		name       string
		openHealth bool
		method     string
		token      string
		stream     bool
		wantCode   codes.Code
		wantID     string
	}{
		{name: "unary with token", method: probev1.ProbeService_GetTarget_FullMethodName, token: tokA, wantID: "alice"},
		{name: "unary without token", method: probev1.ProbeService_GetTarget_FullMethodName, wantCode: codes.Unauthenticated},
		{name: "unary with a wrong token", method: probev1.ProbeService_CreateTarget_FullMethodName, token: tokB, wantCode: codes.Unauthenticated},
		{name: "stream with token", method: probev1.ProbeService_Watch_FullMethodName, token: tokA, stream: true, wantID: "alice"},
		{name: "stream without token", method: probev1.ProbeService_Watch_FullMethodName, stream: true, wantCode: codes.Unauthenticated},
		{name: "stream with a wrong token", method: probev1.ProbeService_Watch_FullMethodName, token: tokA + "x", stream: true, wantCode: codes.Unauthenticated},
		{name: "reflection needs a token", openHealth: true, method: reflectionMethod, stream: true, wantCode: codes.Unauthenticated},
		{name: "reflection with token", openHealth: true, method: reflectionMethod, token: tokA, stream: true, wantID: "alice"},
		{name: "open health", openHealth: true, method: "/grpc.health.v1.Health/Check"},
		{name: "closed health", method: "/grpc.health.v1.Health/Check", wantCode: codes.Unauthenticated},
	}
	addrs := map[bool]string{
		false: startEcho(t, auth.New(auth.Options{Tokens: toks}), nil),
		true:  startEcho(t, auth.New(auth.Options{Tokens: toks, OpenHealth: true}), nil),
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn := dial(t, addrs[tt.openHealth], nil)
			var (
				id  string
				err error
			)
			switch {
			case strings.HasPrefix(tt.method, "/grpc.health"):
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			case tt.stream:
				id, err = stream(t, conn, tt.method, tt.token)
			default:
				id, err = call(t, conn, tt.method, tt.token)
			}
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("code = %v (%v), want %v", got, err, tt.wantCode)
			}
			if id != tt.wantID {
				t.Errorf("identity = %q, want %q", id, tt.wantID)
			}
			if tt.wantCode == codes.Unauthenticated && strings.Contains(status.Convert(err).Message(), tokA) {
				t.Errorf("error %q quotes the token", err)
			}
		})
	}
}

func TestMalformedAuthorization(t *testing.T) {
	t.Parallel()
	conn := dial(t, startEcho(t, auth.New(auth.Options{Tokens: tokens(t, tokA+" alice\n")}), nil), nil)
	for _, v := range []string{"Basic " + tokA, tokA, "Bearer", "bearer  " + tokA + " "} {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", v), 10*time.Second)
		var trailer metadata.MD
		err := conn.Invoke(ctx, probev1.ProbeService_GetTarget_FullMethodName, &emptypb.Empty{}, &emptypb.Empty{}, grpc.Trailer(&trailer))
		cancel()
		if strings.HasPrefix(strings.ToLower(v), "bearer ") && len(strings.TrimSpace(v)) > len("bearer") {
			if err != nil || trailer.Get("owner")[0] != "alice" {
				t.Errorf("authorization %q: %v, want alice (scheme case-insensitive, spaces trimmed)", v, err)
			}
			continue
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("authorization %q: %v, want Unauthenticated", v, err)
		}
	}
}

func TestMutualTLSIdentity(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, clients, other := testpki.NewCA(t, "ca"), testpki.NewCA(t, "clients"), testpki.NewCA(t, "other")
	certFile, keyFile := ca.Server(t, "server").Write(t, dir, "server")
	certs, err := auth.LoadCerts(certFile, keyFile, clients.WriteCA(t, dir, "clients.pem"))
	if err != nil {
		t.Fatal(err)
	}
	certOnly := startEcho(t, auth.New(auth.Options{ClientCerts: true}), certs)
	withTokens := startEcho(t, auth.New(auth.Options{ClientCerts: true, Tokens: tokens(t, tokA+" token-alice\n")}), certs)
	creds := func(kp *testpki.KeyPair) credentials.TransportCredentials {
		cfg := &tls.Config{RootCAs: pool(ca), ServerName: "localhost"}
		if kp != nil {
			cfg.Certificates = []tls.Certificate{*keyPair(t, *kp)}
		}
		return credentials.NewTLS(cfg)
	}
	alice, dnsOnly, stranger := clients.Client(t, "alice"), clients.Client(t, "", "bob.example"), other.Client(t, "mallory")
	tests := []struct {
		name     string
		addr     string
		client   *testpki.KeyPair
		token    string
		wantCode codes.Code
		wantID   string
	}{
		{name: "common name", addr: certOnly, client: &alice, wantID: "alice"},
		{name: "first DNS name", addr: certOnly, client: &dnsOnly, wantID: "bob.example"},
		{name: "no certificate", addr: certOnly, wantCode: codes.Unavailable},
		{name: "certificate of another CA", addr: certOnly, client: &stranger, wantCode: codes.Unavailable},
		{name: "token identity wins", addr: withTokens, client: &alice, token: tokA, wantID: "token-alice"},
		{name: "certificate without token", addr: withTokens, client: &alice, wantCode: codes.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn := dial(t, tt.addr, creds(tt.client))
			id, err := call(t, conn, probev1.ProbeService_CreateTarget_FullMethodName, tt.token)
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("code = %v (%v), want %v", got, err, tt.wantCode)
			}
			if id != tt.wantID {
				t.Errorf("identity = %q, want %q", id, tt.wantID)
			}
		})
	}
}

func TestRateLimitPerIdentity(t *testing.T) {
	t.Parallel()
	a := auth.New(auth.Options{
		Tokens:    tokens(t, tokA+" alice\n"+tokB+" bob\n"),
		Limiter:   auth.NewLimiter(0.001, 2, nil),
		LimitHelp: "--registrations-per-second 0.001",
	})
	conn := dial(t, startEcho(t, a, nil), nil)
	for i := range 2 {
		if _, err := call(t, conn, probev1.ProbeService_CreateTarget_FullMethodName, tokA); err != nil {
			t.Fatalf("create %d within the burst: %v", i, err)
		}
	}
	_, err := call(t, conn, probev1.ProbeService_UpdateTarget_FullMethodName, tokA)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--registrations-per-second 0.001") {
		t.Fatalf("update beyond the burst: %v, want ResourceExhausted naming the flag", err)
	}
	if d := auth.RetryAfter(err); d <= 0 {
		t.Errorf("RetryInfo delay = %v, want > 0", d)
	}
	if _, err := call(t, conn, probev1.ProbeService_GetTarget_FullMethodName, tokA); err != nil {
		t.Errorf("a read is not limited: %v", err)
	}
	if _, err := stream(t, conn, probev1.ProbeService_Watch_FullMethodName, tokA); err != nil {
		t.Errorf("a watch is not limited: %v", err)
	}
	if _, err := call(t, conn, probev1.ProbeService_CreateTarget_FullMethodName, tokB); err != nil {
		t.Errorf("bob is limited by alice's calls: %v", err)
	}
	if _, err := call(t, conn, probev1.ProbeService_TriggerProbe_FullMethodName, tokA); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("trigger beyond the limit: %v, want ResourceExhausted", err)
	}
}

func TestHTTPMiddleware(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, clients := testpki.NewCA(t, "ca"), testpki.NewCA(t, "clients")
	certFile, keyFile := ca.Server(t, "server").Write(t, dir, "server")
	certs, err := auth.LoadCerts(certFile, keyFile, clients.WriteCA(t, dir, "clients.pem"))
	if err != nil {
		t.Fatal(err)
	}
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, engine.ClientFrom(r.Context()))
	})
	get := func(t *testing.T, c *http.Client, url, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	t.Run("tokens", func(t *testing.T) {
		t.Parallel()
		s := httptest.NewServer(auth.New(auth.Options{Tokens: tokens(t, tokA+" alice\n")}).HTTP(echo))
		defer s.Close()
		if code, body := get(t, s.Client(), s.URL, tokA); code != http.StatusOK || body != "alice" {
			t.Errorf("with token: %d %q, want 200 alice", code, body)
		}
		if code, _ := get(t, s.Client(), s.URL, ""); code != http.StatusUnauthorized {
			t.Errorf("without token: %d, want 401", code)
		}
		if code, _ := get(t, s.Client(), s.URL, tokB); code != http.StatusUnauthorized {
			t.Errorf("wrong token: %d, want 401", code)
		}
	})
	t.Run("client certificates", func(t *testing.T) {
		t.Parallel()
		s := httptest.NewUnstartedServer(auth.New(auth.Options{ClientCerts: true}).HTTP(echo))
		s.TLS = certs.TLSConfig()
		s.StartTLS()
		defer s.Close()
		client := func(kp *testpki.KeyPair) *http.Client {
			cfg := &tls.Config{RootCAs: pool(ca), ServerName: "localhost"}
			if kp != nil {
				cfg.Certificates = []tls.Certificate{*keyPair(t, *kp)}
			}
			return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		}
		alice := clients.Client(t, "alice")
		if code, body := get(t, client(&alice), s.URL, ""); code != http.StatusOK || body != "alice" {
			t.Errorf("with a client certificate: %d %q, want 200 alice", code, body)
		}
		if code, _ := get(t, client(nil), s.URL, ""); code == http.StatusOK {
			t.Errorf("without a client certificate: %d, want refused", code)
		}
	})
	t.Run("nothing configured", func(t *testing.T) {
		t.Parallel()
		s := httptest.NewServer(auth.New(auth.Options{}).HTTP(echo))
		defer s.Close()
		if code, _ := get(t, s.Client(), s.URL, ""); code != http.StatusOK {
			t.Errorf("open: %d, want 200", code)
		}
	})
}

func TestRevokedTokenEndsStreams(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := testpki.WriteFile(t, dir, "tokens", []byte(tokA+" alice\n"+tokB+" bob\n"))
	toks, err := auth.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	conn := dial(t, startEcho(t, auth.New(auth.Options{Tokens: toks}), nil), nil)
	open := func(tok string) grpc.ClientStream {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+tok)
		s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, longStream)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMsg(&emptypb.Empty{}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecvMsg(&emptypb.Empty{}); err != nil {
			t.Fatalf("first message: %v", err)
		}
		return s
	}
	alice, bob := open(tokA), open(tokB)

	testpki.WriteFile(t, dir, "tokens", []byte(tokB+" bob\n"))
	if changed, err := toks.Reload(); !changed || err != nil {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	err = alice.RecvMsg(&emptypb.Empty{})
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("alice's stream after her token was removed: %v, want Unauthenticated", err)
	}
	// Bob's stream goes on.
	done := make(chan error, 1)
	go func() { done <- bob.RecvMsg(&emptypb.Empty{}) }()
	select {
	case err := <-done:
		t.Fatalf("bob's stream ended: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
}
