package check

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/engine/probe"
)

func TestTLSConfig(t *testing.T) {
	t.Parallel()
	caPEM := testCAPEM(t)
	tests := []struct {
		name     string
		in       *probe.TLS
		wantErr  string
		wantPool bool
		wantSkip bool
		wantName string
	}{
		{name: "nil verifies with system roots"},
		{name: "empty", in: &probe.TLS{}},
		{name: "ca", in: &probe.TLS{CAPEM: caPEM}, wantPool: true},
		{name: "skip", in: &probe.TLS{InsecureSkipVerify: true}, wantSkip: true},
		{name: "server name", in: &probe.TLS{ServerName: "svc.test"}, wantName: "svc.test"},
		{name: "bad ca", in: &probe.TLS{CAPEM: "not pem"}, wantErr: "tls.caPem: no PEM-encoded certificate found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := tlsConfig(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("tlsConfig() error = %v; want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.RootCAs != nil; got != tt.wantPool {
				t.Errorf("RootCAs set = %v; want %v", got, tt.wantPool)
			}
			if cfg.InsecureSkipVerify != tt.wantSkip {
				t.Errorf("InsecureSkipVerify = %v; want %v", cfg.InsecureSkipVerify, tt.wantSkip)
			}
			if cfg.ServerName != tt.wantName {
				t.Errorf("ServerName = %q; want %q", cfg.ServerName, tt.wantName)
			}
			if cfg.MinVersion != tls.VersionTLS12 {
				t.Errorf("MinVersion = %x; want TLS 1.2", cfg.MinVersion)
			}
		})
	}
}

func testCAPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
