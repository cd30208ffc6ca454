package auth_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"testing"

	"github.com/probed/probed/internal/testpki"
	"github.com/probed/probed/server/auth"
)

// serveTLS accepts TLS connections with cfg on loopback until the test
// ends, completing each handshake, and returns the address.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = lis.Close()
		<-done
	})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	return lis.Addr().String()
}

// serverCN dials addr and returns the common name of the certificate the
// server presents.
func serverCN(t *testing.T, addr string, roots *x509.CertPool, client *tls.Certificate) (string, error) {
	t.Helper()
	cfg := &tls.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{"h2"}}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	// With TLS 1.3 a refused client certificate shows on the first read.
	if _, err := c.Read(make([]byte, 1)); err != nil && !isEOF(err) {
		return "", err
	}
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

func pool(ca *testpki.CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

func keyPair(t *testing.T, kp testpki.KeyPair) *tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

func TestCertsReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ca")
	certFile, keyFile := ca.Server(t, "server-1").Write(t, dir, "server")
	certs, err := auth.LoadCerts(certFile, keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	if certs.MutualTLS() {
		t.Error("MutualTLS without a client CA")
	}
	addr := serveTLS(t, certs.TLSConfig())
	if cn, err := serverCN(t, addr, pool(ca), nil); err != nil || cn != "server-1" {
		t.Fatalf("server certificate = %q, %v; want server-1", cn, err)
	}

	// A certificate written without its key does not load: the old one
	// stays.
	next := ca.Server(t, "server-2")
	testpki.WriteFile(t, dir, "server.crt", next.CertPEM)
	if _, err := certs.Reload(); err == nil {
		t.Fatal("Reload of a certificate with the wrong key: no error")
	}
	if cn, err := serverCN(t, addr, pool(ca), nil); err != nil || cn != "server-1" {
		t.Fatalf("after a failed reload: %q, %v; want server-1 still", cn, err)
	}
	testpki.WriteFile(t, dir, "server.key", next.KeyPEM)
	if changed, err := certs.Reload(); !changed || err != nil {
		t.Fatalf("Reload = %v, %v; want true, nil", changed, err)
	}
	if cn, err := serverCN(t, addr, pool(ca), nil); err != nil || cn != "server-2" {
		t.Fatalf("after the reload: %q, %v; want server-2", cn, err)
	}
}

func TestCertsClientCAReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ca")
	clientsA, clientsB := testpki.NewCA(t, "clients-a"), testpki.NewCA(t, "clients-b")
	certFile, keyFile := ca.Server(t, "server").Write(t, dir, "server")
	caFile := clientsA.WriteCA(t, dir, "clients.pem")
	certs, err := auth.LoadCerts(certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	if !certs.MutualTLS() {
		t.Error("MutualTLS with a client CA = false")
	}
	addr := serveTLS(t, certs.TLSConfig())
	alice, bob := keyPair(t, clientsA.Client(t, "alice")), keyPair(t, clientsB.Client(t, "bob"))
	if _, err := serverCN(t, addr, pool(ca), nil); err == nil {
		t.Error("handshake without a client certificate succeeded")
	}
	if _, err := serverCN(t, addr, pool(ca), alice); err != nil {
		t.Errorf("client of CA a: %v", err)
	}
	if _, err := serverCN(t, addr, pool(ca), bob); err == nil {
		t.Error("client of CA b accepted before the switch")
	}
	clientsB.WriteCA(t, dir, "clients.pem")
	if changed, err := certs.Reload(); !changed || err != nil {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	if _, err := serverCN(t, addr, pool(ca), bob); err != nil {
		t.Errorf("client of CA b after the switch: %v", err)
	}
	if _, err := serverCN(t, addr, pool(ca), alice); err == nil {
		t.Error("client of CA a still accepted after the switch")
	}
}

func TestLoadCertsErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ca")
	certFile, keyFile := ca.Server(t, "server").Write(t, dir, "server")
	notPEM := testpki.WriteFile(t, dir, "garbage", []byte("not PEM"))
	tests := []struct {
		name                string
		cert, key, clientCA string
	}{
		{name: "no key", cert: certFile},
		{name: "missing file", cert: certFile, key: dir + "/missing.key"},
		{name: "key is not PEM", cert: certFile, key: notPEM},
		{name: "client CA is not PEM", cert: certFile, key: keyFile, clientCA: notPEM},
		{name: "client CA missing", cert: certFile, key: keyFile, clientCA: dir + "/missing.pem"},
	}
	for _, tt := range tests {
		if _, err := auth.LoadCerts(tt.cert, tt.key, tt.clientCA); err == nil {
			t.Errorf("%s: LoadCerts succeeded", tt.name)
		}
	}
}
