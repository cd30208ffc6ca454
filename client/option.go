package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Option configures Dial.
type Option func(*dialOptions)

type dialOptions struct {
	insecure  bool
	tls       bool
	caFile    string
	certFile  string
	keyFile   string
	token     string
	tokenFile string
	grpc      []grpc.DialOption
}

// WithInsecure dials without TLS. It is the default when no TLS option is
// given, and it conflicts with WithTLS and WithClientCert.
func WithInsecure() Option {
	return func(o *dialOptions) { o.insecure = true }
}

// WithTLS dials with TLS, verifying the server's certificate against the
// PEM-encoded CA certificates in caFile, or against the system pool when
// caFile is "".
func WithTLS(caFile string) Option {
	return func(o *dialOptions) {
		o.tls = true
		o.caFile = caFile
	}
}

// WithClientCert presents the certificate and key in these PEM files to the
// server (mutual TLS). It implies TLS (with the system pool unless WithTLS
// names a CA file).
func WithClientCert(certFile, keyFile string) Option {
	return func(o *dialOptions) {
		o.tls = true
		o.certFile = certFile
		o.keyFile = keyFile
	}
}

// WithToken sends "authorization: Bearer <token>" with every call. Without
// TLS, Dial refuses it unless the address is a loopback one.
func WithToken(token string) Option {
	return func(o *dialOptions) { o.token = token }
}

// WithTokenFile is WithToken with the token read from path (surrounding
// white space trimmed). The file is read by Dial and read again at most
// once a minute, so a rotated token is picked up.
func WithTokenFile(path string) Option {
	return func(o *dialOptions) { o.tokenFile = path }
}

// WithDialOptions adds gRPC dial options, applied after the client's own
// (e.g. grpc.WithConnectParams, interceptors).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *dialOptions) { o.grpc = append(o.grpc, opts...) }
}

// grpcOptions turns the options into gRPC dial options for addr.
func (o *dialOptions) grpcOptions(addr string) ([]grpc.DialOption, error) {
	if o.insecure && o.tls {
		return nil, errors.New("client: WithInsecure conflicts with WithTLS and WithClientCert")
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return nil, errors.New("client: WithClientCert needs both a certificate and a key file")
	}
	if o.token != "" && o.tokenFile != "" {
		return nil, errors.New("client: WithToken conflicts with WithTokenFile")
	}
	var opts []grpc.DialOption
	if o.tls {
		cfg, err := o.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if o.token != "" || o.tokenFile != "" {
		if !o.tls && !isLoopback(addr) {
			return nil, fmt.Errorf("client: refusing to send a token without TLS to %s, which is not a loopback address", addr)
		}
		src := &tokenSource{token: o.token, path: o.tokenFile}
		if _, err := src.get(); err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithPerRPCCredentials(&bearer{src: src, requireTLS: o.tls}))
	}
	opts = append(opts, grpc.WithConnectParams(reconnect))
	return append(opts, o.grpc...), nil
}

// reconnect caps gRPC's delay between connection attempts at Watch's
// longest backoff: with gRPC's default (up to two minutes), a watch would
// notice a restarted server long after it came back.
var reconnect = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  backoff.DefaultConfig.BaseDelay,
		Multiplier: backoff.DefaultConfig.Multiplier,
		Jitter:     backoff.DefaultConfig.Jitter,
		MaxDelay:   DefaultMaxBackoff,
	},
	MinConnectTimeout: 20 * time.Second, // gRPC's default
}

func (o *dialOptions) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, fmt.Errorf("client: read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client: no PEM certificate in CA file %s", o.caFile)
		}
		cfg.RootCAs = pool
	}
	if o.certFile != "" {
		cert, err := tls.LoadX509KeyPair(o.certFile, o.keyFile)
		if err != nil {
			return nil, fmt.Errorf("client: load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// isLoopback reports whether a gRPC target names the local host: a unix
// socket, "localhost" or a loopback IP, with or without a scheme
// ("dns:///127.0.0.1:50051").
func isLoopback(target string) bool {
	if addrs := strings.Split(target, ","); len(addrs) > 1 { // replicas
		for _, a := range addrs {
			if !isLoopback(strings.TrimSpace(a)) {
				return false
			}
		}
		return true
	}
	if strings.HasPrefix(target, "unix:") || strings.HasPrefix(target, "unix-abstract:") {
		return true
	}
	if _, rest, ok := strings.Cut(target, "://"); ok {
		// scheme://[authority]/endpoint
		_, target, _ = strings.Cut(rest, "/")
	}
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		host = strings.Trim(target, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	host, _, _ = strings.Cut(host, "%") // IPv6 zone
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tokenRefresh is how long a token read from a file is used before the
// file is read again.
const tokenRefresh = time.Minute

// tokenSource returns a fixed token or the contents of a file.
type tokenSource struct {
	path string

	mu    sync.Mutex // guards token and read
	token string
	read  time.Time
}

func (s *tokenSource) get() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.path == "" || (s.token != "" && time.Since(s.read) < tokenRefresh) {
		return s.token, nil
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		if s.token != "" {
			return s.token, nil // keep the last good token
		}
		return "", fmt.Errorf("client: read token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("client: token file %s is empty", s.path)
	}
	s.token, s.read = tok, time.Now()
	return tok, nil
}

// bearer is per-RPC credentials sending a bearer token.
type bearer struct {
	src        *tokenSource
	requireTLS bool
}

func (b *bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	tok, err := b.src.get()
	if err != nil {
		return nil, err
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

func (b *bearer) RequireTransportSecurity() bool { return b.requireTLS }
