// Package auth protects probed's API. It authenticates every gRPC call
// (and the HTTP pages that share the API's credentials) with a bearer
// token from a token file or a verified client certificate, puts the
// caller's identity in the call's context (engine.WithClient, so the engine
// records who owns what and enforces per-client limits), and rate-limits
// the calls that make probed open connections, per identity. The token
// file and the TLS certificates are reread when they change (Watch), so
// rotating them needs no restart.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/probed/probed/engine"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Anonymous is the identity of a caller on a server that authenticates no
// one, followed by "@" and the caller's IP address (AnonymousAt): the
// callers of one host share the per-client limits, those of another host
// have their own.
const Anonymous = "anonymous"

// AnonymousAt is the identity of an unauthenticated caller from addr (a
// host:port or an IP address): "anonymous@127.0.0.1", "anonymous@::1";
// Anonymous alone when addr is unknown.
func AnonymousAt(addr string) string {
	if addr == "" {
		return Anonymous
	}
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	return Anonymous + "@" + addr
}

// healthPrefix is the method prefix of grpc.health.v1.Health.
const healthPrefix = "/grpc.health.v1.Health/"

// DefaultRateLimited are the methods that make probed connect to targets
// (or run commands) at once: each takes a token of the caller's bucket.
var DefaultRateLimited = []string{
	probev1.ProbeService_CreateTarget_FullMethodName,
	probev1.ProbeService_UpdateTarget_FullMethodName,
	probev1.ProbeService_TriggerProbe_FullMethodName,
	probev1.ProbeService_ResetTarget_FullMethodName,
	// One token per call, whatever the size of its set (its creates are
	// bounded by the target limits).
	probev1.ProbeService_ApplyTargets_FullMethodName,
}

// Options configure an Authenticator. The zero value authenticates no one
// (every caller is Anonymous) and limits nothing.
type Options struct {
	// Tokens, when set, makes a valid "authorization: Bearer <token>"
	// required on every call; the token's name is the caller's identity.
	Tokens *Tokens
	// ClientCerts says connections carry a client certificate verified by
	// the TLS handshake (mutual TLS): a call without one is refused, and
	// without Tokens the certificate's identity (CertIdentity) is the
	// caller's.
	ClientCerts bool
	// OpenHealth leaves grpc.health.v1.Health open to callers without
	// credentials (liveness checks of probed itself). Everything else,
	// server reflection included, requires them.
	OpenHealth bool
	// Limiter, when set, limits the RateLimited methods per identity;
	// beyond it a call fails with ResourceExhausted and a RetryInfo.
	Limiter *Limiter
	// RateLimited are the full method names Limiter applies to; nil means
	// DefaultRateLimited.
	RateLimited []string
	// LimitHelp names the setting of the limit in the error message, e.g.
	// "--registrations-per-second 10".
	LimitHelp string
	// Replicas are the identities of the cluster's replicas (their client
	// certificates' or tokens' names). A call from one of them that
	// carries the metadata "probed-forwarded-for" (a call forwarded to
	// the target's owner) is authorized and rate-limited as that identity,
	// the original caller's; from anyone else that metadata is ignored.
	Replicas []string
	Logger   *slog.Logger
}

// Authenticator holds the checks; its interceptors and HTTP middleware
// apply them. It is safe for concurrent use.
type Authenticator struct {
	opts    Options
	limited map[string]bool
}

// New returns an Authenticator configured by opts.
func New(opts Options) *Authenticator {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RateLimited == nil {
		opts.RateLimited = DefaultRateLimited
	}
	a := &Authenticator{opts: opts, limited: make(map[string]bool)}
	for _, m := range opts.RateLimited {
		a.limited[m] = true
	}
	return a
}

// ServerOptions are the unary and stream interceptors, chained so they
// run before any interceptor added after them and before the handlers.
func (a *Authenticator) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(a.UnaryInterceptor),
		grpc.ChainStreamInterceptor(a.StreamInterceptor),
	}
}

// UnaryInterceptor authenticates a unary call, applies the rate limit and
// calls handler with the identity in the context (engine.WithClient).
func (a *Authenticator) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := a.admit(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// StreamInterceptor is UnaryInterceptor for streams (Watch). A stream
// authenticated by a token that is then removed from the token file ends
// with Unauthenticated at the reload.
func (a *Authenticator) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := a.admit(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	if a.opts.Tokens == nil || (a.opts.OpenHealth && strings.HasPrefix(info.FullMethod, healthPrefix)) {
		return handler(srv, &identityStream{ServerStream: ss, ctx: ctx})
	}
	md, _ := metadata.FromIncomingContext(ctx)
	tok, _ := bearerToken(md.Get("authorization")) // admit checked it
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go a.revokeOnRemoval(ctx, cancel, tok)
	err = handler(srv, &identityStream{ServerStream: ss, ctx: ctx})
	if cause := context.Cause(ctx); errors.Is(cause, errRevoked) {
		return status.Error(codes.Unauthenticated, cause.Error())
	}
	return err
}

var errRevoked = errors.New("the token of this call was revoked")

// revokeOnRemoval cancels ctx with errRevoked when tok stops being valid;
// it returns when ctx is done.
func (a *Authenticator) revokeOnRemoval(ctx context.Context, cancel context.CancelCauseFunc, tok string) {
	for {
		changed := a.opts.Tokens.Changed()
		if _, ok := a.opts.Tokens.Lookup(tok); !ok {
			cancel(errRevoked)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// identityStream is a stream whose context carries the identity.
type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identityStream) Context() context.Context { return s.ctx }

// admit authenticates a call of method and takes its rate-limit token.
func (a *Authenticator) admit(ctx context.Context, method string) (context.Context, error) {
	if a.opts.OpenHealth && strings.HasPrefix(method, healthPrefix) {
		return ctx, nil
	}
	id, err := a.authenticate(ctx)
	if err != nil {
		a.opts.Logger.Debug("call refused: not authenticated", "method", method, "peer", peerAddr(ctx), "err", err)
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	id = a.forwardedFor(ctx, id)
	if a.opts.Limiter != nil && a.limited[method] {
		if ok, wait := a.opts.Limiter.Allow(id); !ok {
			a.opts.Logger.Debug("call refused: rate limit", "method", method, "identity", id, "retry_after", wait)
			return nil, rateLimited(id, wait, a.opts.LimitHelp)
		}
	}
	return engine.WithClient(ctx, id), nil
}

// metadataForwardedFor is server.MetadataForwardedFor.
const metadataForwardedFor = "probed-forwarded-for"

// forwardedFor returns the identity a call is made for: the
// "probed-forwarded-for" metadata when the caller, id, is a replica, id
// otherwise.
func (a *Authenticator) forwardedFor(ctx context.Context, id string) string {
	v := metadata.ValueFromIncomingContext(ctx, metadataForwardedFor)
	if len(v) != 1 || v[0] == "" {
		return id
	}
	if !slices.Contains(a.opts.Replicas, id) {
		a.opts.Logger.Debug("forwarded-for metadata ignored: the caller is not a replica", "identity", id, "claimed", v[0])
		return id
	}
	return v[0]
}

func rateLimited(id string, wait time.Duration, help string) error {
	msg := fmt.Sprintf("client %q is over its rate of calls that start probes", id)
	if help != "" {
		msg += " (" + help + ")"
	}
	msg += fmt.Sprintf("; retry in %v", wait.Round(time.Millisecond))
	st, err := status.New(codes.ResourceExhausted, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)})
	if err != nil {
		return status.Error(codes.ResourceExhausted, msg)
	}
	return st.Err()
}

// authenticate returns the caller's identity, or why it has none.
func (a *Authenticator) authenticate(ctx context.Context) (string, error) {
	id, err := a.identify(peerCertificate(ctx), metadata.ValueFromIncomingContext(ctx, "authorization"))
	if id == Anonymous {
		id = AnonymousAt(peerAddr(ctx))
	}
	return id, err
}

// identify checks the credentials of a call: the client certificate the
// TLS handshake verified (nil if none) and the authorization header
// values.
func (a *Authenticator) identify(cert *x509.Certificate, authorization []string) (string, error) {
	if a.opts.ClientCerts && cert == nil {
		return "", errors.New("a client certificate signed by the server's client CA is required")
	}
	if a.opts.Tokens != nil {
		tok, err := bearerToken(authorization)
		if err != nil {
			return "", err
		}
		id, ok := a.opts.Tokens.Lookup(tok)
		if !ok {
			return "", errors.New("invalid bearer token")
		}
		return id, nil
	}
	if a.opts.ClientCerts {
		return CertIdentity(cert), nil
	}
	return Anonymous, nil
}

// bearerToken reads the token of an authorization header.
func bearerToken(values []string) (string, error) {
	if len(values) == 0 {
		return "", errors.New(`missing credentials: send the header "authorization: Bearer <token>"`)
	}
	if len(values) > 1 {
		return "", errors.New("more than one authorization header")
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", errors.New(`malformed authorization header: want "Bearer <token>"`)
	}
	return strings.TrimSpace(tok), nil
}

// peerCertificate returns the client certificate the TLS handshake
// verified, or nil.
func peerCertificate(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}

// CertIdentity is the identity of a client certificate: its subject's
// common name, else its first DNS name, else "cert-" and the first 12 hex
// digits of the certificate's SHA-256.
func CertIdentity(cert *x509.Certificate) string {
	if cn := cert.Subject.CommonName; cn != "" {
		return cn
	}
	if len(cert.DNSNames) > 0 && cert.DNSNames[0] != "" {
		return cert.DNSNames[0]
	}
	sum := sha256.Sum256(cert.Raw)
	return "cert-" + hex.EncodeToString(sum[:6])
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// HTTP wraps h (a status page, metrics) with the same authentication: a
// bearer token in the Authorization header when tokens are configured,
// and a verified client certificate when ClientCerts is set (so h must be
// served over TLS with the same client CA). The identity is put in the
// request's context with engine.WithClient. Unauthenticated requests get
// 401 Unauthorized. As for gRPC streams, the context of a request
// authenticated by a token is cancelled when the token is removed from
// the token file, so a long response (the status page's event stream)
// ends at the reload.
func (a *Authenticator) HTTP(h http.Handler) http.Handler {
	if a.opts.Tokens == nil && !a.opts.ClientCerts {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := a.authenticateHTTP(r)
		if err != nil {
			a.opts.Logger.Debug("HTTP request refused: not authenticated", "path", r.URL.Path, "peer", r.RemoteAddr, "err", err)
			w.Header().Set("WWW-Authenticate", `Bearer realm="probed"`)
			http.Error(w, "unauthenticated: "+err.Error(), http.StatusUnauthorized)
			return
		}
		ctx := engine.WithClient(r.Context(), id)
		if a.opts.Tokens != nil {
			tok, _ := bearerToken(r.Header.Values("Authorization")) // authenticateHTTP checked it
			var cancel context.CancelCauseFunc
			ctx, cancel = context.WithCancelCause(ctx)
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel(nil) // before the wait: it ends the goroutine
			wg.Go(func() { a.revokeOnRemoval(ctx, cancel, tok) })
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

func (a *Authenticator) authenticateHTTP(r *http.Request) (string, error) {
	var cert *x509.Certificate
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		cert = r.TLS.VerifiedChains[0][0]
	}
	return a.identify(cert, r.Header.Values("Authorization"))
}

// RetryAfter returns the RetryInfo delay of a rate-limited call's error,
// or 0.
func RetryAfter(err error) time.Duration {
	st, ok := status.FromError(err)
	if !ok {
		return 0
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}
