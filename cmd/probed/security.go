package main

import (
	"flag"
	"log/slog"
	"net/http"

	"google.golang.org/grpc"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
)

// securityConfig holds the API security and target policy flags.
type securityConfig struct{}

func (c *securityConfig) register(fs *flag.FlagSet) {}

// validate checks the security flags against the listen address.
func (c *securityConfig) validate(addr string) error { return nil }

// security is the API's protection (TLS, authentication) and the policy of
// what targets may be probed.
type security struct{}

func newSecurity(cfg *config, log *slog.Logger) (*security, error) { return &security{}, nil }

// grpcOptions are the server's credentials and interceptors.
func (s *security) grpcOptions() []grpc.ServerOption { return nil }

// configure applies the limits and the target policy to the engine and the
// checkers.
func (s *security) configure(eo *engine.Options, co *check.Options) {}

// protect wraps an HTTP handler (status page, metrics) with the API's
// authentication.
func (s *security) protect(h http.Handler) http.Handler { return h }

// close stops watching certificate files.
func (s *security) close() {}
