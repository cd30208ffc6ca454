package inject

import (
	"crypto/x509"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/probed/probed/internal/testpki"
)

func commonName(t *testing.T, c *Certificate) string {
	t.Helper()
	got, err := c.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(got.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.Subject.CommonName
}

// TestCertificateReloaded: rotated files are served at the next look (a
// second later at most); files that do not load keep the last
// certificate.
func TestCertificateReloaded(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ca")
	certFile, keyFile := ca.Server(t, "first").Write(t, dir, "first")
	c, err := NewCertificate(certFile, keyFile, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	c.readTime = now
	if got := commonName(t, c); got != "first" {
		t.Fatalf("serves %q", got)
	}

	// cert-manager writes the new pair over the old files.
	newCert, newKey := ca.Server(t, "second").Write(t, dir, "second")
	rename(t, newCert, certFile)
	rename(t, newKey, keyFile)
	if got := commonName(t, c); got != "first" {
		t.Errorf("serves %q before a second passed; want the files read at most once a second", got)
	}
	now = now.Add(recheck)
	if got := commonName(t, c); got != "second" {
		t.Errorf("serves %q after the rotation; want second", got)
	}

	// Half written: the certificate of a third pair, the old key.
	third, _ := ca.Server(t, "third").Write(t, dir, "third")
	rename(t, third, certFile)
	now = now.Add(recheck)
	if got := commonName(t, c); got != "second" {
		t.Errorf("serves %q with a mismatched pair on disk; want the last good one", got)
	}
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	now = now.Add(recheck)
	if got := commonName(t, c); got != "second" {
		t.Errorf("serves %q with the key gone; want the last good one", got)
	}
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}
