package inject

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"
)

// recheck is how often the certificate's files are read again.
const recheck = time.Second

// Certificate is a TLS certificate read from a certificate and a key file
// (PEM), and read again when either changes: cert-manager rotates them,
// and kubelet swaps a Secret's mounted files. Use GetCertificate as
// tls.Config's.
type Certificate struct {
	certFile, keyFile string
	log               *slog.Logger
	now               func() time.Time

	mu       sync.Mutex
	cert     *tls.Certificate // guarded by mu
	certPEM  []byte           // what cert was read from; guarded by mu
	keyPEM   []byte           // guarded by mu
	readTime time.Time        // of the last read; guarded by mu
}

// NewCertificate reads the certificate of certFile and keyFile; an error
// names what is wrong.
func NewCertificate(certFile, keyFile string, log *slog.Logger) (*Certificate, error) {
	c := &Certificate{certFile: certFile, keyFile: keyFile, log: log, now: time.Now}
	certPEM, keyPEM, err := c.read()
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("webhook certificate %s, %s: %w", certFile, keyFile, err)
	}
	c.cert, c.certPEM, c.keyPEM, c.readTime = &cert, certPEM, keyPEM, c.now()
	return c, nil
}

// GetCertificate returns the current certificate, read again when its
// files changed (read at most once a second). Files that do not load
// (one rewritten, the other not yet) keep the last certificate, and are
// read again at the next handshake a second later.
func (c *Certificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if now.Sub(c.readTime) < recheck {
		return c.cert, nil
	}
	c.readTime = now
	certPEM, keyPEM, err := c.read()
	if err != nil {
		c.log.Warn("webhook certificate files unreadable; serving the last certificate", "err", err)
		return c.cert, nil
	}
	if bytes.Equal(certPEM, c.certPEM) && bytes.Equal(keyPEM, c.keyPEM) {
		return c.cert, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		c.log.Warn("webhook certificate files changed but do not load; serving the last certificate", "err", err)
		return c.cert, nil
	}
	c.cert, c.certPEM, c.keyPEM = &cert, certPEM, keyPEM
	c.log.Info("webhook certificate reloaded", "cert", c.certFile)
	return c.cert, nil
}

// maxPEMBytes bounds each file read.
const maxPEMBytes = 1 << 20

func (c *Certificate) read() (certPEM, keyPEM []byte, err error) {
	certPEM, err = readBounded(c.certFile)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = readBounded(c.keyFile)
	return certPEM, keyPEM, err
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	defer func() { _ = f.Close() }()
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(f, maxPEMBytes+1)); err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	if b.Len() > maxPEMBytes {
		return nil, fmt.Errorf("webhook certificate: %s is over %d bytes", path, maxPEMBytes)
	}
	return b.Bytes(), nil
}
