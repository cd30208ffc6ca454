package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// Certs is the server's TLS certificate and, for mutual TLS, the CA that
// signs client certificates, read from PEM files and reread by Reload when
// any of them changes: new connections get the new certificate without a
// restart; established ones keep theirs. It is safe for concurrent use.
type Certs struct {
	certFile, keyFile, caFile string

	cfg   atomic.Pointer[tls.Config] // the config handed to each handshake
	stamp stamps                     // used by Reload only
}

// LoadCerts reads the server certificate and key (PEM) and, when caFile is
// not "", the CA certificates that client certificates must chain to.
func LoadCerts(certFile, keyFile, caFile string) (*Certs, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("a certificate and its key are both required")
	}
	c := &Certs{certFile: certFile, keyFile: keyFile, caFile: caFile}
	var now []stamp
	for _, p := range c.paths() {
		st, err := stat(p)
		if err != nil {
			return nil, err
		}
		now = append(now, st)
	}
	if err := c.load(); err != nil {
		return nil, err
	}
	c.stamp.current = now
	return c, nil
}

func (c *Certs) paths() []string {
	if c.caFile == "" {
		return []string{c.certFile, c.keyFile}
	}
	return []string{c.certFile, c.keyFile, c.caFile}
}

// ClientCertificate returns the current certificate, for a client that
// presents the server's own certificate (a replica calling another with
// mutual TLS). It is a tls.Config.GetClientCertificate.
func (c *Certs) ClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return &c.cfg.Load().Certificates[0], nil
}

// MutualTLS reports whether clients must present a certificate.
func (c *Certs) MutualTLS() bool { return c.caFile != "" }

func (c *Certs) load() error {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s with key %s: %w", c.certFile, c.keyFile, err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"h2", "http/1.1"}, // gRPC; HTTP/1.1 for an HTTPS status page
	}
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return fmt.Errorf("client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("client CA %s: no PEM certificate in it", c.caFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	c.cfg.Store(cfg)
	return nil
}

// Reload rereads the files if any changed since the last load. Files that
// do not load (a certificate written before its key, say) leave the
// previous certificate in use and are reported once; Reload tries again
// when they change again.
func (c *Certs) Reload() (changed bool, err error) {
	return c.stamp.reload(c.paths(), c.load)
}

// String names the files, for logs.
func (c *Certs) String() string {
	if c.caFile == "" {
		return fmt.Sprintf("TLS certificate %s", c.certFile)
	}
	return fmt.Sprintf("TLS certificate %s and client CA %s", c.certFile, c.caFile)
}

// NotAfter returns when the current certificate expires.
func (c *Certs) NotAfter() time.Time {
	cert := c.cfg.Load().Certificates[0]
	if cert.Leaf == nil {
		return time.Time{}
	}
	return cert.Leaf.NotAfter
}

// TLSConfig returns the server's TLS configuration: every handshake takes
// the certificate (and client CA) current at that moment.
func (c *Certs) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return c.cfg.Load(), nil
		},
	}
}
