package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/server"
	"github.com/probed/probed/server/admission"
	"github.com/probed/probed/server/auth"
	"github.com/probed/probed/server/connlimit"
	"github.com/probed/probed/server/hostguard"
	probedtel "github.com/probed/probed/telemetry"
)

// Defaults of the security flags; SECURITY.md explains each.
const (
	defaultMaxTargets             = 100_000 // --max-targets, in config.go
	defaultMaxWatchers            = 1000
	defaultMaxRequestBytes        = 1 << 20
	defaultRegistrationsPerSecond = 100
	defaultRegistrationsBurst     = 200
	// maxHeaderListBytes bounds the metadata of one call.
	maxHeaderListBytes = 64 << 10
	// handshakeTimeout bounds a connection's TLS and HTTP/2 handshake.
	handshakeTimeout = 10 * time.Second

	// Connection bounds (issue 21): what a client without credentials can
	// make probed hold.
	defaultMaxStreamsPerConnection = 100
	defaultMaxConnections          = 4096
	defaultMaxConnectionsPerIP     = 128
	defaultMaxUnauthenticatedConns = 256
	defaultFirstCallTimeout        = 10 * time.Second
	defaultConnectionIdleTimeout   = 5 * time.Minute
	// keepaliveTime and keepaliveTimeout: a connection silent for
	// keepaliveTime is pinged, and closed if the ping is not answered
	// within keepaliveTimeout (a peer that vanished).
	keepaliveTime    = 2 * time.Minute
	keepaliveTimeout = 20 * time.Second
)

// securityConfig holds the API security and target policy flags.
type securityConfig struct {
	tlsCert, tlsKey string
	clientCA        string
	tokenFile       string
	authzPolicy     string
	peerIdentities  commaList
	insecure        bool
	openHealth      bool
	reloadInterval  time.Duration

	allowTargets  prefixList
	denyTargets   denyList
	execAllowlist commaList
	allowedHosts  commaList
	allowSelf     bool

	maxTargetsPerClient    int
	maxWatchers            int
	maxWatchersPerClient   optionalInt // unset: watchersPerClient's default
	maxRequestBytes        int
	maxApplyBytes          int
	maxAppliesPerClient    int
	registrationsPerSecond float64
	registrationsBurst     int

	maxStreamsPerConnection int
	maxConnections          int
	maxConnectionsPerIP     int
	maxUnauthenticated      int
	firstCallTimeout        time.Duration
	idleTimeout             time.Duration
}

func (c *securityConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM file of the server's TLS certificate (with --tls-key); reloaded when it changes")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM file of the TLS certificate's private key")
	fs.StringVar(&c.clientCA, "client-ca", "", "PEM file of the CA certificates that sign client certificates: clients must present one (mutual TLS); the identity is its CN or first DNS name")
	fs.StringVar(&c.tokenFile, "auth-token-file", "", `file of bearer tokens, one per line as "token [name]": every call needs "authorization: Bearer <token>"; reloaded when it changes`)
	fs.StringVar(&c.authzPolicy, "authz-policy", "", "YAML file of authorization rules granting identities read, write and operate on target-name prefixes; everything else is denied (see SECURITY.md); reloaded when it changes. Unset: every authenticated caller may do everything")
	fs.Var(&c.peerIdentities, "peer-identities", "comma-separated identities (certificate or token names) of the cluster's replicas: a call they forward is authorized and rate-limited as the original caller they name")
	fs.BoolVar(&c.insecure, "insecure", false, "allow a non-loopback --addr, --ui-addr or --metrics-addr without TLS or authentication (anyone who reaches it can use probed)")
	fs.BoolVar(&c.openHealth, "open-health", true, "leave grpc.health.v1.Health open to callers without credentials (reflection always requires them)")
	fs.DurationVar(&c.reloadInterval, "reload-interval", auth.DefaultReloadInterval, "how often the certificate, client CA and token files are checked for changes")
	c.denyTargets.set(check.DefaultDeny())
	fs.Var(&c.allowTargets, "allow-targets", "comma-separated CIDRs probes may connect to; empty: all not denied")
	fs.Var(&c.denyTargets, "deny-targets", "comma-separated CIDRs probes may never connect to (replaces the default: keep the metadata entries you need; none denies nothing, an empty value is refused)")
	fs.BoolVar(&c.allowSelf, "allow-self-probes", false, "allow probes of probed's own status page (--ui-addr) and metrics (--metrics-addr) listeners, which are refused by default: each such probe makes probed serve a whole event stream or metrics scrape")
	fs.Var(&c.execAllowlist, "exec-allowlist", "comma-separated commands (exact command[0]) exec probes may run; empty: any (with --allow-exec)")
	fs.Var(&c.allowedHosts, "allowed-hosts", "comma-separated host names the status page and metrics may be reached by, besides IP addresses, localhost and the names they listen on (a DNS-rebinding guard); * allows any")
	fs.IntVar(&c.maxTargetsPerClient, "max-targets-per-client", 0, "maximum number of targets one client identity may own (0: no limit but --max-targets)")
	fs.IntVar(&c.maxWatchers, "max-watchers", defaultMaxWatchers, "maximum number of Watch streams open at once (0: no limit)")
	fs.Var(&c.maxWatchersPerClient, "max-watchers-per-client", "maximum number of Watch streams and status-page event streams one client identity may have open at once (default a quarter of --max-watchers; 0: no limit but --max-watchers)")
	fs.IntVar(&c.maxRequestBytes, "max-request-bytes", defaultMaxRequestBytes, "largest request message accepted, in bytes")
	fs.IntVar(&c.maxApplyBytes, "max-apply-bytes", server.DefaultMaxApplyBytes, "largest ApplyTargets set, in bytes of its messages")
	fs.IntVar(&c.maxAppliesPerClient, "max-applies-per-client", server.DefaultMaxAppliesPerClient, "ApplyTargets calls one client identity may have open at once")
	fs.Float64Var(&c.registrationsPerSecond, "registrations-per-second", defaultRegistrationsPerSecond, fmt.Sprintf("CreateTarget, UpdateTarget, TriggerProbe, ResetTarget and ApplyTargets calls allowed per second per client, an ApplyTargets set counting one more per %d targets beyond the first %d (0: no limit)", server.ApplyTargetsPerToken, server.ApplyTargetsPerToken))
	fs.IntVar(&c.registrationsBurst, "registrations-burst", defaultRegistrationsBurst, "size of each client's bucket: how many such calls it may make at once before --registrations-per-second applies")
	fs.IntVar(&c.maxStreamsPerConnection, "max-streams-per-connection", defaultMaxStreamsPerConnection, "maximum number of calls (streams) open at once on one API connection")
	fs.IntVar(&c.maxConnections, "max-connections", defaultMaxConnections, "maximum number of API connections open at once (0: no limit)")
	fs.IntVar(&c.maxConnectionsPerIP, "max-connections-per-ip", defaultMaxConnectionsPerIP, "maximum number of API connections open at once from one IP address (0: no limit)")
	fs.IntVar(&c.maxUnauthenticated, "max-unauthenticated-connections", defaultMaxUnauthenticatedConns, "maximum number of API connections open at once that have not yet made an authenticated call (0: no limit)")
	fs.DurationVar(&c.firstCallTimeout, "first-call-timeout", defaultFirstCallTimeout, "an API connection that has made no authenticated call this long after it was opened is closed (0: never)")
	fs.DurationVar(&c.idleTimeout, "connection-idle-timeout", defaultConnectionIdleTimeout, "an API connection with no call open for this long is closed (0: never)")
}

// validate checks the security flags against the listen addresses (the
// API's, the status page's, the metrics'): a non-loopback address needs
// TLS or authentication unless --insecure.
func (c *securityConfig) validate(listeners []listener) error {
	switch {
	case (c.tlsCert == "") != (c.tlsKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case c.clientCA != "" && c.tlsCert == "":
		return errors.New("--client-ca needs --tls-cert and --tls-key: mutual TLS is TLS")
	case c.authzPolicy != "" && !c.authenticates():
		return errors.New("--authz-policy needs authentication (--auth-token-file or --client-ca): its rules grant identities")
	case c.reloadInterval <= 0:
		return fmt.Errorf("--reload-interval %v: must be positive", c.reloadInterval)
	case c.maxTargetsPerClient < 0:
		return fmt.Errorf("--max-targets-per-client %d: must not be negative", c.maxTargetsPerClient)
	case c.maxWatchers < 0:
		return fmt.Errorf("--max-watchers %d: must not be negative", c.maxWatchers)
	case c.maxWatchersPerClient.n < 0:
		return fmt.Errorf("--max-watchers-per-client %d: must not be negative", c.maxWatchersPerClient.n)
	case c.maxRequestBytes < 1024:
		return fmt.Errorf("--max-request-bytes %d: must be at least 1024", c.maxRequestBytes)
	case c.maxApplyBytes < c.maxRequestBytes:
		return fmt.Errorf("--max-apply-bytes %d: must be at least --max-request-bytes (%d)", c.maxApplyBytes, c.maxRequestBytes)
	case c.maxAppliesPerClient < 1:
		return fmt.Errorf("--max-applies-per-client %d: must be at least 1", c.maxAppliesPerClient)
	case c.registrationsPerSecond < 0:
		return fmt.Errorf("--registrations-per-second %v: must not be negative", c.registrationsPerSecond)
	case c.registrationsBurst < 1:
		return fmt.Errorf("--registrations-burst %d: must be at least 1", c.registrationsBurst)
	case c.maxStreamsPerConnection < 1:
		return fmt.Errorf("--max-streams-per-connection %d: must be at least 1", c.maxStreamsPerConnection)
	case c.maxConnections < 0, c.maxConnectionsPerIP < 0, c.maxUnauthenticated < 0:
		return fmt.Errorf("--max-connections %d, --max-connections-per-ip %d, --max-unauthenticated-connections %d: must not be negative",
			c.maxConnections, c.maxConnectionsPerIP, c.maxUnauthenticated)
	case c.firstCallTimeout < 0 || c.idleTimeout < 0:
		return fmt.Errorf("--first-call-timeout %v, --connection-idle-timeout %v: must not be negative", c.firstCallTimeout, c.idleTimeout)
	}
	if c.tlsCert != "" || c.authenticates() || c.insecure {
		return nil
	}
	for _, l := range listeners {
		if loopback(l.addr) {
			continue
		}
		if l.flag == "--addr" {
			return fmt.Errorf("--addr %s is not a loopback address and neither TLS (--tls-cert, --tls-key) nor authentication "+
				"(--auth-token-file, --client-ca) is configured: anyone who can reach it could make probed connect to any "+
				"address it can reach (and run commands with --allow-exec). Configure TLS and tokens (see SECURITY.md), "+
				"or pass --insecure to accept that", l.addr)
		}
		return fmt.Errorf("%s %s is not a loopback address and neither TLS (--tls-cert, --tls-key) nor authentication "+
			"(--auth-token-file, --client-ca) is configured: anyone who can reach it could read every target, with the "+
			"headers of its probes. Configure TLS and tokens (see SECURITY.md), or pass --insecure to accept that", l.flag, l.addr)
	}
	return nil
}

// watchersPerClient is --max-watchers-per-client, by default a quarter of
// --max-watchers (at least 1), so that at least four clients share the
// slots; with no --max-watchers, no limit.
func (c *securityConfig) watchersPerClient() int {
	switch {
	case c.maxWatchersPerClient.set:
		return c.maxWatchersPerClient.n
	case c.maxWatchers == 0:
		return 0
	}
	return max(1, c.maxWatchers/4)
}

// authenticates reports whether callers must prove who they are.
func (c *securityConfig) authenticates() bool { return c.tokenFile != "" || c.clientCA != "" }

// loopback reports whether a listen address accepts local connections
// only: a loopback IP or "localhost". An empty host (every interface) or
// any other name is not.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// security is the API's protection (TLS, authentication) and the policy of
// what targets may be probed.
type security struct {
	cfg    securityConfig
	allow  bool // --allow-exec
	log    *slog.Logger
	certs  *auth.Certs  // nil without TLS
	tokens *auth.Tokens // nil without token authentication
	policy *auth.Policy // nil without --authz-policy
	authn  *auth.Authenticator
	limit  *auth.Limiter // nil without --registrations-per-second

	guard *hostguard.Guard    // Host and Origin checks of the HTTP listeners
	conns *connlimit.Listener // the API's listener, set by listen
	// own are the HTTP listeners probes may not reach (without
	// --allow-self-probes); added as they open (listening).
	own *check.OwnListeners

	stop func()         // stops the reloading goroutine
	wg   sync.WaitGroup // the reloading goroutine
}

func newSecurity(cfg *config, log *slog.Logger) (*security, error) {
	sc := cfg.security
	s := &security{cfg: sc, allow: cfg.allowExec, log: log, stop: func() {}, own: &check.OwnListeners{}}
	var reload []auth.Reloader
	if sc.tlsCert != "" {
		certs, err := auth.LoadCerts(sc.tlsCert, sc.tlsKey, sc.clientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key/--client-ca: %w", err)
		}
		s.certs = certs
		reload = append(reload, certs)
		if na := certs.NotAfter(); !na.IsZero() && time.Until(na) < 7*24*time.Hour {
			log.Warn("the TLS certificate expires soon (or has expired)", "not_after", certs.NotAfter())
		}
	}
	if sc.tokenFile != "" {
		tokens, err := auth.LoadTokens(sc.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--auth-token-file: %w", err)
		}
		s.tokens = tokens
		reload = append(reload, tokens)
	}
	if sc.authzPolicy != "" {
		policy, err := auth.LoadPolicy(sc.authzPolicy)
		if err != nil {
			return nil, fmt.Errorf("--authz-policy: %w", err)
		}
		s.policy = policy
		reload = append(reload, policy)
	}
	ao := auth.Options{
		Tokens:      s.tokens,
		ClientCerts: sc.clientCA != "",
		OpenHealth:  sc.openHealth,
		Replicas:    sc.peerIdentities,
		Logger:      log,
	}
	if sc.registrationsPerSecond > 0 {
		s.limit = auth.NewLimiter(sc.registrationsPerSecond, sc.registrationsBurst, nil)
		ao.Limiter = s.limit
		ao.LimitHelp = fmt.Sprintf("--registrations-per-second %g, --registrations-burst %d", sc.registrationsPerSecond, sc.registrationsBurst)
	}
	s.authn = auth.New(ao)
	var pages []string // the HTTP listeners: all but the API's
	for _, l := range cfg.listeners()[1:] {
		if l.flag == xdsFlag {
			continue // gRPC, not HTTP
		}
		pages = append(pages, l.addr)
	}
	s.guard = hostguard.New(pages, sc.allowedHosts)
	s.warn(cfg)
	if len(reload) > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		s.stop = cancel
		s.wg.Go(func() { auth.Watch(ctx, sc.reloadInterval, log, reload...) })
	}
	return s, nil
}

// authorizer is the API's authorization (nil: everything allowed).
func (s *security) authorizer() server.Authorizer {
	if s.policy == nil {
		return nil
	}
	return s.policy
}

// serverOptions are the server's options of the API's protection: the
// authorization policy, the rate limit and the bounds of ApplyTargets.
func (s *security) serverOptions(o server.Options) server.Options {
	o.Authorizer = s.authorizer()
	if s.limit != nil {
		o.Limiter = s.limit
	}
	o.MaxApplyBytes, o.MaxAppliesPerClient = s.cfg.maxApplyBytes, s.cfg.maxAppliesPerClient
	return o
}

// scrapersOnly guards a handler of the metrics listener (/metrics, the
// --pprof profiles): under --authz-policy only an identity granted the
// metrics verb reaches it, others get 403; without a policy every
// authenticated caller does. Serve h behind protect, which puts the
// caller's identity in the request's context.
func (s *security) scrapersOnly(h http.Handler) http.Handler {
	return s.granted(auth.VerbMetrics, "scrape metrics", h)
}

// readersOnly guards the status page: under --authz-policy only an
// identity granted read on some name reaches it (its figures are about
// every target); without a policy every authenticated caller does.
func (s *security) readersOnly(h http.Handler) http.Handler {
	return s.granted(auth.VerbRead, "see the status page", h)
}

// granted is h for callers the policy grants verb on some name; others
// get 403 saying they may not do what.
func (s *security) granted(verb, what string, h http.Handler) http.Handler {
	if s.policy == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := engine.ClientFrom(r.Context())
		if !s.policy.AllowedAny(id, verb) {
			s.log.Debug("HTTP request refused: not authorized", "path", r.URL.Path, "identity", id, "verb", verb)
			http.Error(w, fmt.Sprintf("%q may not %s: --authz-policy grants it no %s verb", id, what, verb), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// readFilter is the status page's read filter of a request's caller
// under --authz-policy (nil without it).
func (s *security) readFilter() func(ctx context.Context) func(name string) bool {
	if s.policy == nil {
		return nil
	}
	return func(ctx context.Context) func(name string) bool {
		id := engine.ClientFrom(ctx)
		return func(name string) bool { return s.policy.Allowed(id, auth.VerbRead, name) }
	}
}

// warn logs the configurations that are allowed but weak.
func (s *security) warn(cfg *config) {
	for _, l := range cfg.listeners() {
		if loopback(l.addr) {
			continue
		}
		switch {
		case s.cfg.insecure && s.certs == nil && !s.cfg.authenticates():
			s.log.Warn("serving without TLS or authentication on a non-loopback address (--insecure): anyone who reaches it can use probed", "flag", l.flag, "addr", l.addr)
		case s.certs == nil:
			s.log.Warn("serving without TLS on a non-loopback address: tokens travel in clear text", "flag", l.flag, "addr", l.addr)
		case !s.cfg.authenticates():
			s.log.Warn("serving TLS without authentication on a non-loopback address: any client can use probed", "flag", l.flag, "addr", l.addr)
		}
	}
	policy := check.Policy{Allow: s.cfg.allowTargets, Deny: s.cfg.denyTargets.prefixList}
	for _, a := range metadataAddresses {
		if policy.Check(a) == nil {
			s.log.Warn("probes may reach a cloud metadata address: --deny-targets does not cover it (the default does)", "addr", a, "deny_targets", s.cfg.denyTargets.String())
		}
	}
	if len(s.cfg.execAllowlist) > 0 && !cfg.allowExec {
		s.log.Warn("--exec-allowlist has no effect without --allow-exec: exec probes are refused")
	}
}

// listen opens the API's listener, bounded in connections (in all, per
// IP address, not yet authenticated, and in time to a first
// authenticated call: see grpcOptions).
func (s *security) listen(addr string) (net.Listener, error) {
	lis, err := s.listenGRPC(addr)
	if err != nil {
		return nil, err
	}
	s.conns = lis
	return lis, nil
}

// listenGRPC opens a gRPC listener bounded as the API's (the xDS one
// shares its flags); serve it with grpcOptionsOn.
func (s *security) listenGRPC(addr string) (*connlimit.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return connlimit.Wrap(lis, connlimit.Options{
		Max:         s.cfg.maxConnections,
		PerIP:       s.cfg.maxConnectionsPerIP,
		Pending:     s.cfg.maxUnauthenticated,
		AdmitWithin: s.cfg.firstCallTimeout,
		Logger:      s.log,
	}), nil
}

// listenHTTP opens the listener of an HTTP endpoint (the status page, the
// metrics), bounded as the API's is by default, each listener on its own
// (the --max-connections flags name the API's): in connections in all,
// per IP address, not yet authenticated, and in time to a first
// authenticated request. Serve its handlers through protectOn with it,
// which admits a connection at its first authenticated request.
func (s *security) listenHTTP(flagName, addr string) (*connlimit.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return connlimit.Wrap(lis, connlimit.Options{
		Max:         defaultMaxConnections,
		PerIP:       defaultMaxConnectionsPerIP,
		Pending:     defaultMaxUnauthenticatedConns,
		AdmitWithin: defaultFirstCallTimeout,
		Logger:      s.log.With("listener", flagName),
	}), nil
}

// connectionStats are the figures of the API listener listen made.
func (s *security) connectionStats() probedtel.ConnectionStats {
	st := s.conns.Stats()
	return probedtel.ConnectionStats{Open: st.Open, Pending: st.Pending, Refused: st.Refused, Expired: st.Expired}
}

// grpcOptions are the server's credentials, bounds and interceptors.
// Calls are authenticated from their headers (InTapHandle), before a
// handler goroutine starts or a message is read, and a call let through
// admits its connection (listen).
func (s *security) grpcOptions() []grpc.ServerOption { return s.grpcOptionsOn(s.conns) }

// grpcOptionsOn are grpcOptions for a server on conns (listenGRPC).
func (s *security) grpcOptionsOn(conns *connlimit.Listener) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(s.cfg.maxRequestBytes),
		grpc.MaxHeaderListSize(maxHeaderListBytes),
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.MaxConcurrentStreams(uint32(s.cfg.maxStreamsPerConnection)),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: s.cfg.idleTimeout,
			Time:              keepaliveTime,
			Timeout:           keepaliveTimeout,
		}),
		grpc.InTapHandle(s.authn.InHandle(func(ctx context.Context) {
			// A call that passed authentication admits its connection.
			if p, ok := peer.FromContext(ctx); ok && conns != nil {
				conns.Admit(p.Addr)
			}
		})),
	}
	if s.certs != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.certs.TLSConfig())))
	}
	return append(opts, s.authn.ServerOptions()...)
}

// listening records an HTTP listener of probed's (the status page, the
// metrics), named by its flag, as one probes may not reach.
func (s *security) listening(flag string, addr net.Addr) { s.own.Add(flag, addr) }

// tlsConfig returns the TLS configuration of the API (nil without TLS),
// for HTTP listeners that share its certificate and client CA.
func (s *security) tlsConfig() *tls.Config {
	if s.certs == nil {
		return nil
	}
	return s.certs.TLSConfig()
}

// configure applies the limits and the target policy to the engine and the
// checkers.
func (s *security) configure(eo *engine.Options, co *check.Options) {
	policy := &check.Policy{Allow: s.cfg.allowTargets, Deny: s.cfg.denyTargets.prefixList}
	if !s.cfg.allowSelf {
		policy.Own = s.own
	}
	co.Policy = policy
	co.ExecAllowlist = s.cfg.execAllowlist
	eo.Admit = admission.New(admission.Options{Policy: policy, ExecAllowlist: s.cfg.execAllowlist, AllowExec: s.allow})
	eo.MaxTargetsPerClient = s.cfg.maxTargetsPerClient
	eo.MaxWatchers = s.cfg.maxWatchers
	eo.MaxWatchersPerClient = s.cfg.watchersPerClient()
}

// protect wraps an HTTP handler (status page, metrics) with the API's
// authentication, behind the Host and Origin checks that keep other web
// sites out (DNS rebinding, cross-site requests).
func (s *security) protect(h http.Handler) http.Handler { return s.guard.Wrap(s.authn.HTTP(h)) }

// protectOn is protect for a handler served on lis (listenHTTP): a request
// that passes authentication admits its connection, which is then no
// longer closed for want of one.
func (s *security) protectOn(lis *connlimit.Listener, h http.Handler) http.Handler {
	return s.protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lis.AdmitRemote(r.RemoteAddr)
		h.ServeHTTP(w, r)
	}))
}

// close stops watching certificate files.
func (s *security) close() {
	s.stop()
	s.wg.Wait()
}

// prefixList is a flag of comma-separated CIDR prefixes; a bare address
// is its own /32 or /128. Set replaces the list (the default included).
type prefixList []netip.Prefix

func (l *prefixList) set(p []netip.Prefix) { *l = p }

func (l *prefixList) String() string {
	if l == nil {
		return ""
	}
	parts := make([]string, len(*l))
	for i, p := range *l {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

func (l *prefixList) Set(v string) error {
	var out []netip.Prefix
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := parsePrefix(part)
		if err != nil {
			return err
		}
		out = append(out, p)
	}
	*l = out
	return nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is neither a CIDR prefix nor an IP address", s)
		}
		return netip.PrefixFrom(ip, ip.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix: %w", s, err)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set; did you mean %s?", s, p.Masked())
	}
	return p, nil
}

// denyList is --deny-targets: a prefixList that is never empty by
// accident. An empty value (`--deny-targets=`, `deny-targets: []` in a
// file) is refused, since it would let probes reach the cloud metadata
// addresses the default denies; "none" says that deliberately.
type denyList struct{ prefixList }

// denyNothing is the value of a deny list that denies nothing.
const denyNothing = "none"

func (l *denyList) String() string {
	if l == nil {
		return ""
	}
	if len(l.prefixList) == 0 {
		return denyNothing
	}
	return l.prefixList.String()
}

func (l *denyList) Set(v string) error {
	if strings.TrimSpace(v) == denyNothing {
		l.prefixList = prefixList{}
		return nil
	}
	var p prefixList
	if err := p.Set(v); err != nil {
		return err
	}
	if len(p) == 0 {
		return fmt.Errorf("would deny nothing, the cloud metadata addresses of the default (169.254.169.254, fd00:ec2::254, 100.100.100.200) included: "+
			"list the prefixes to deny, or say --deny-targets=%s to deny nothing", denyNothing)
	}
	l.prefixList = p
	return nil
}

// metadataAddresses are the cloud metadata services' addresses: the
// default deny list covers them, and probed warns when the policy lets
// probes reach one.
var metadataAddresses = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
}

// optionalInt is an int flag that knows whether it was set.
type optionalInt struct {
	n   int
	set bool
}

func (o *optionalInt) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.Itoa(o.n)
}

func (o *optionalInt) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return errors.New("not an integer")
	}
	o.n, o.set = n, true
	return nil
}

// commaList is a flag of comma-separated strings.
type commaList []string

func (l *commaList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

func (l *commaList) Set(v string) error {
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	*l = out
	return nil
}
