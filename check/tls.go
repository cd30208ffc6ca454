package check

import (
	"crypto/tls"
	"crypto/x509"
	"errors"

	"github.com/probed/probed/engine/probe"
)

// tlsConfig builds the client TLS configuration of an HTTPS or gRPC-TLS
// probe. Certificates are verified against the system roots unless t says
// otherwise: CAPEM replaces the roots, InsecureSkipVerify turns
// verification off, ServerName overrides the name sent (SNI) and verified
// (by default the probe's host). t may be nil.
func tlsConfig(t *probe.TLS) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t == nil {
		return cfg, nil
	}
	if t.CAPEM != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(t.CAPEM)) {
			return nil, errors.New("tls.caPem: no PEM-encoded certificate found")
		}
		cfg.RootCAs = pool
	}
	cfg.InsecureSkipVerify = t.InsecureSkipVerify
	cfg.ServerName = t.ServerName
	return cfg, nil
}
