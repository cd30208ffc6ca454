package client_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/probedtest"
)

// requireToken returns server options that accept only "Bearer want".
func requireToken(want string) []grpc.ServerOption {
	check := func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		auth := md.Get("authorization")
		switch {
		case len(auth) == 0:
			return status.Error(codes.Unauthenticated, "no bearer token")
		case auth[0] != "Bearer "+want:
			return status.Error(codes.PermissionDenied, "token not allowed")
		}
		return nil
	}
	return []grpc.ServerOption{
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := check(ctx); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := check(ss.Context()); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

func TestToken(t *testing.T) {
	t.Parallel()
	s := probedtest.Start(t, probedtest.Options{GRPC: requireToken("s3cret")})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts []client.Option
		want error // of Get on a missing target
	}{
		{"no token", nil, client.ErrUnauthenticated},
		{"wrong token", []client.Option{client.WithToken("guess")}, client.ErrPermissionDenied},
		{"token", []client.Option{client.WithToken("s3cret")}, client.ErrNotFound},
		{"token file", []client.Option{client.WithTokenFile(tokenFile)}, client.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := dial(t, s.Addr, tt.opts...)
			if _, err := c.Get(t.Context(), "nope"); !errors.Is(err, tt.want) {
				t.Errorf("Get error = %v, want %v", err, tt.want)
			}
		})
	}

	t.Run("watch unauthenticated is terminal", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		c := dial(t, s.Addr)
		ch := c.Watch(ctx)
		if r := recv(t, ch); !errors.Is(r.Err, client.ErrUnauthenticated) {
			t.Errorf("watch error = %v, want ErrUnauthenticated", r.Err)
		}
		if _, ok := <-ch; ok {
			t.Error("channel open after the terminal error")
		}
	})
}

func TestDialRefusesTokenInPlaintextToRemote(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr    string
		wantErr bool
	}{
		{"127.0.0.1:50051", false},
		{"localhost:50051", false},
		{"[::1]:50051", false},
		{"dns:///localhost:50051", false},
		{"unix:///run/probed.sock", false},
		{"10.0.0.1:50051", true},
		{"probed.example.com:50051", true},
		{"dns:///probed.example.com:50051", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()
			c, err := client.Dial(t.Context(), tt.addr, client.WithToken("t"))
			if err == nil {
				_ = c.Close()
			}
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Errorf("Dial error = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestDialRejectsConflictingOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts []client.Option
	}{
		{"insecure and tls", []client.Option{client.WithInsecure(), client.WithTLS("")}},
		{"token and token file", []client.Option{client.WithToken("a"), client.WithTokenFile("/nonexistent")}},
		{"missing token file", []client.Option{client.WithTokenFile(filepath.Join(t.TempDir(), "missing"))}},
		{"missing CA file", []client.Option{client.WithTLS(filepath.Join(t.TempDir(), "missing"))}},
		{"cert without key", []client.Option{client.WithClientCert("cert.pem", "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if c, err := client.Dial(t.Context(), "127.0.0.1:1", tt.opts...); err == nil {
				_ = c.Close()
				t.Error("Dial succeeded, want an error")
			}
		})
	}
}

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	pki := newPKI(t)
	s := probedtest.Start(t, probedtest.Options{GRPC: []grpc.ServerOption{grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{pki.server},
		ClientCAs:    pki.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}))}})

	tests := []struct {
		name string
		opts []client.Option
		want error // of Get on a missing target
	}{
		{"mtls", []client.Option{client.WithTLS(pki.caFile), client.WithClientCert(pki.certFile, pki.keyFile)}, client.ErrNotFound},
		{"mtls with token", []client.Option{client.WithTLS(pki.caFile), client.WithClientCert(pki.certFile, pki.keyFile), client.WithToken("t")}, client.ErrNotFound},
		{"no client certificate", []client.Option{client.WithTLS(pki.caFile)}, client.ErrUnavailable},
		{"plaintext", nil, client.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := dial(t, s.Addr, tt.opts...)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			if _, err := c.Get(ctx, "nope"); !errors.Is(err, tt.want) {
				t.Errorf("Get error = %v, want %v", err, tt.want)
			}
		})
	}
}

// pki is a CA, a server certificate for 127.0.0.1 and a client
// certificate, with the client's files written to a temporary directory.
type pki struct {
	pool                      *x509.CertPool
	server                    tls.Certificate
	caFile, certFile, keyFile string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	caKey, caDER := newCert(t, &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "probed test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}, nil, nil)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	srvKey, srvDER := newCert(t, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "probed"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}, ca, caKey)
	p.server = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	cliKey, cliDER := newCert(t, &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "probectl"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}, ca, caKey)
	keyDER, err := x509.MarshalECPrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	p.caFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)
	p.certFile = writePEM(t, dir, "client.pem", "CERTIFICATE", cliDER)
	p.keyFile = writePEM(t, dir, "client-key.pem", "EC PRIVATE KEY", keyDER)
	return p
}

// newCert makes a key and a certificate signed by parent (self-signed
// when parent is nil).
func newCert(t *testing.T, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
