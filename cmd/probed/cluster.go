package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/probed/probed/cluster"
	"github.com/probed/probed/cluster/replica"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/feature"
	"github.com/probed/probed/internal/keyspace"
	"github.com/probed/probed/server"
	"github.com/probed/probed/server/auth"
	storeetcd "github.com/probed/probed/store/etcd"
	probedtel "github.com/probed/probed/telemetry"
)

// The stores --store names.
const (
	storeBolt = "bolt"
	storeEtcd = "etcd"
)

// clusterConfig holds the store and cluster flags.
type clusterConfig struct {
	store                     string
	endpoints                 commaList
	etcdCA, etcdCert, etcdKey string
	prefix                    string
	leaseTTL                  time.Duration
	settle                    time.Duration
	replicaID                 string
	advertise                 string
	peerCA                    string
	compact                   bool
}

func (c *clusterConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.store, "store", storeBolt, `where state is kept: "bolt" (one file under --data-dir, one process) or "etcd" (an etcd cluster shared by several replicas, see --etcd-endpoints)`)
	fs.Var(&c.endpoints, "etcd-endpoints", "comma-separated etcd client endpoints, http://host:port or host:port as etcdctl takes them (with --store=etcd)")
	fs.StringVar(&c.etcdCA, "etcd-ca", "", "PEM file of the CA that signs etcd's server certificates (TLS to etcd)")
	fs.StringVar(&c.etcdCert, "etcd-cert", "", "PEM client certificate for etcd (with --etcd-key)")
	fs.StringVar(&c.etcdKey, "etcd-key", "", "PEM key of --etcd-cert")
	fs.StringVar(&c.prefix, "etcd-prefix", cluster.DefaultPrefix, "prefix of every key probed writes in etcd (several clusters can share one etcd under different prefixes)")
	fs.DurationVar(&c.leaseTTL, "lease-ttl", 5*time.Second, "a replica that stops renewing its lease (dead, partitioned, or alive but stuck) loses its targets this long after: whole seconds, at least 2s (etcd's minimum at default timing)")
	fs.DurationVar(&c.settle, "settle", 0, "a new replica takes targets from the others only after being a member this long (default 2 × --lease-ttl): a replica that flaps never moves targets")
	fs.StringVar(&c.replicaID, "replica-id", "", "this replica's name in the cluster, unique among the live replicas (default: host name and --addr's port)")
	fs.StringVar(&c.advertise, "advertise-addr", "", "host:port at which the other replicas reach this one's gRPC API (default: --addr, when it names a host)")
	fs.BoolVar(&c.compact, "etcd-compact", false, "compact etcd's history as events leave the replicas' --history (off: leave it to etcd's --auto-compaction-*); etcd compaction is global: it deletes the old revisions of every key in the etcd, under every prefix, and breaks other clients' watches from before it")
	fs.StringVar(&c.peerCA, "peer-ca", "", "PEM file of the CA that signs the other replicas' certificates, to verify them when a call is forwarded to a target's replica (default: --client-ca, else the system's roots)")
}

// validate checks the cluster flags; addr is --addr.
func (c *clusterConfig) validate(addr string) error {
	switch c.store {
	case storeBolt:
		if len(c.endpoints) > 0 {
			return errors.New("--etcd-endpoints needs --store=etcd")
		}
		return nil
	case storeEtcd:
	default:
		return fmt.Errorf("--store %q: must be %q or %q", c.store, storeBolt, storeEtcd)
	}
	switch {
	case len(c.endpoints) == 0:
		return errors.New("--store=etcd needs --etcd-endpoints")
	case (c.etcdCert == "") != (c.etcdKey == ""):
		return errors.New("--etcd-cert and --etcd-key go together")
	case c.leaseTTL < 2*time.Second || c.leaseTTL%time.Second != 0:
		return fmt.Errorf("--lease-ttl %v: must be whole seconds, at least 2s", c.leaseTTL)
	case c.settle < 0:
		return fmt.Errorf("--settle %v: must not be negative", c.settle)
	case !strings.HasPrefix(c.prefix, "/"):
		return fmt.Errorf("--etcd-prefix %q: must start with /", c.prefix)
	}
	if c.advertise == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil || host == "" || net.ParseIP(host).IsUnspecified() {
			return fmt.Errorf("--addr %s does not say how other replicas reach this one: set --advertise-addr", addr)
		}
		c.advertise = addr
	} else if _, _, err := net.SplitHostPort(c.advertise); err != nil {
		return fmt.Errorf("--advertise-addr %q: %w", c.advertise, err)
	}
	if c.replicaID == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--replica-id: the host name is unknown (%w): set --replica-id", err)
		}
		_, port, _ := net.SplitHostPort(c.advertise)
		c.replicaID = host + ":" + port
	}
	return nil
}

// endpointURLs accepts host:port as etcdctl does.
func (c *clusterConfig) endpointURLs() []string {
	out := make([]string, len(c.endpoints))
	for i, e := range c.endpoints {
		if !strings.Contains(e, "://") {
			scheme := "http://"
			if c.etcdCA != "" || c.etcdCert != "" {
				scheme = "https://"
			}
			e = scheme + e
		}
		out[i] = e
	}
	return out
}

// etcdTLS is the TLS configuration of the etcd client (nil: plain).
func (c *clusterConfig) etcdTLS() (*tls.Config, error) {
	if c.etcdCA == "" && c.etcdCert == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.etcdCA != "" {
		pool, err := loadPool(c.etcdCA, "--etcd-ca")
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if c.etcdCert != "" {
		cert, err := tls.LoadX509KeyPair(c.etcdCert, c.etcdKey)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert %s, --etcd-key %s: %w", c.etcdCert, c.etcdKey, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func loadPool(file, flagName string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in it", flagName, file)
	}
	return pool, nil
}

// openCluster connects to etcd and builds the cluster-mode backend: the
// etcd store, membership and shard ownership, and forwarding to owners.
func openCluster(ctx context.Context, cfg *config, sec *security, tel *telemetry, log *slog.Logger) (*backend, error) {
	cc := &cfg.cluster
	if err := checkReplicaCert(sec.certs); err != nil {
		return nil, err
	}
	tc, err := cc.etcdTLS()
	if err != nil {
		return nil, err
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   cc.endpointURLs(),
		TLS:         tc,
		DialTimeout: 5 * time.Second,
		// Notice a dead connection to etcd within seconds, not minutes.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
		Context:              context.WithoutCancel(ctx),
		DialOptions:          tel.grpcClientOptions(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(cc.endpoints, ","), err)
	}
	closeClient := func() {
		if err := client.Close(); err != nil {
			log.Debug("closing the etcd client", "err", err)
		}
	}

	health := &healthSwitch{serving: true}
	// Membership drives the engine (releases, heartbeats, the view's
	// suspension) once the engine runs: b.join hands it over.
	member, err := replica.Bind(cluster.Options{
		Client:        client,
		Prefix:        cc.prefix,
		ReplicaID:     cc.replicaID,
		AdvertiseAddr: cc.advertise,
		LeaseTTL:      cc.leaseTTL,
		Settle:        cc.settle,
		Clock:         clockwork.NewRealClock(),
		Logger:        log,
	}, health.set)
	if err != nil {
		closeClient()
		return nil, err
	}
	cl := member.Cluster()
	store, err := storeetcd.Open(ctx, storeetcd.Options{
		Client: client,
		Prefix: cc.prefix,
		// Ownership is in the store's log: the shards held on the lease
		// of this process's member key, taken and dropped by the engine
		// at the revision of their claim, release or loss, and fencing
		// every write.
		Shards:   cl.ShardCount(),
		Instance: cl.Instance(),
		Leading:  cl.Leading,
		// Applies are recorded under a lock on the replica's lease (the
		// one its member key and shard keys are on), so that another
		// finishes one this replica began and did not.
		Lease: func() clientv3.LeaseID { return cl.Stats().Lease },
		// One etcd watch: the cluster's view of the members and shards
		// comes from the store's follow too.
		Membership: cl.Observe,
		Compact:    cc.compact,
		Settings:   clusterSettings(cfg),
		ReplicaID:  cc.replicaID,
		Logger:     log,
	})
	if err != nil {
		closeClient()
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(cc.endpoints, ","), err)
	}
	peers := newPeers(cl, cc.replicaID, sec, cc.peerCA, log)
	b := &backend{
		store:    store,
		mayProbe: cl.LeaseValid,
		forward:  peers,
		replicas: replicas{cl},
		replica:  cc.replicaID,
		health:   health,
		// An interrupted apply is looked for a third of a TTL after the
		// lease that held it expired, at most.
		resumeEvery: cc.leaseTTL / 3,
		join: func(ctx context.Context, eng *engine.Engine) error {
			return member.Run(ctx, eng, store)
		},
		stats: func() probedtel.ClusterStats {
			st := cl.Stats()
			return probedtel.ClusterStats{OwnedShards: st.Shards, Members: st.Members, Renewals: st.Renewals,
				RenewalsSkipped: st.RenewalsSkipped, Losses: st.LeaseLosses, Claims: st.Claims, Releases: st.Releases}
		},
		close: func() {
			peers.close()
			if err := store.Close(); err != nil {
				log.Error("closing the store", "err", err)
			}
			closeClient()
		},
		where: []any{"store", "etcd", "etcd_endpoints", strings.Join(cc.endpoints, ","), "replica", cc.replicaID, "advertise_addr", cc.advertise},
	}
	return b, nil
}

// checkReplicaCert refuses a --tls-cert that the other replicas would
// refuse as a client certificate under mutual TLS (a replica presents its
// own certificate when it forwards a call to a target's owner): one whose
// extended key usages leave out clientAuth. Every forward would fail, for
// ever, with a retryable Unavailable. certs nil: no TLS.
func checkReplicaCert(certs *auth.Certs) error {
	if certs == nil || !certs.MutualTLS() {
		return nil
	}
	cert, _ := certs.ClientCertificate(nil)
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("--tls-cert: %w", err)
	}
	if len(leaf.ExtKeyUsage) == 0 && len(leaf.UnknownExtKeyUsage) == 0 {
		return nil // any usage
	}
	for _, u := range leaf.ExtKeyUsage {
		if u == x509.ExtKeyUsageClientAuth || u == x509.ExtKeyUsageAny {
			return nil
		}
	}
	return errors.New("--tls-cert: with --client-ca and --store=etcd, a replica presents its certificate to the other replicas when it forwards a call to a target's owner, and they refuse it: its extended key usage lacks clientAuth (TLS Web Client Authentication); issue it for both serverAuth and clientAuth")
}

// clusterSettings are the flags that change what a stored spec means:
// every replica of a cluster must have the same (the first one records
// them in etcd, a replica with others refuses to start).
func clusterSettings(cfg *config) map[string]string {
	gates := make([]string, 0, len(feature.Known()))
	for _, g := range feature.Known() {
		gates = append(gates, fmt.Sprintf("%s=%t", g, cfg.gates.Enabled(g)))
	}
	return map[string]string{
		"--min-period":    cfg.minPeriod.String(),
		"--min-timeout":   cfg.minTimeout.String(),
		"--feature-gates": strings.Join(gates, ","),
	}
}

// healthSwitch carries the replica's serving status (false while its
// lease is lost) to the health server, which exists only later.
type healthSwitch struct {
	mu      sync.Mutex
	serving bool               // guarded by mu
	apply   func(serving bool) // nil until attached; guarded by mu
}

// attach makes apply receive the status, the current one first.
func (h *healthSwitch) attach(apply func(serving bool)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.apply = apply
	apply(h.serving)
}

func (h *healthSwitch) set(serving bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.serving = serving
	if h.apply != nil {
		h.apply(serving)
	}
}

// replicas answers the server's questions about the cluster.
type replicas struct{ cl *cluster.Cluster }

func (r replicas) OwnerOf(name string) string {
	if m, ok := r.cl.Owner(name); ok {
		return m.ID
	}
	return ""
}

func (r replicas) Members() []server.Replica {
	ms := r.cl.Members()
	out := make([]server.Replica, len(ms))
	for i, m := range ms {
		out[i] = server.Replica{ID: m.ID, Addr: m.Addr, Shards: m.Shards, Joined: m.Joined}
	}
	return out
}

func (r replicas) Shards() int { return r.cl.ShardCount() }

// peers forwards calls to the replica that owns a target: one client
// connection per replica address, kept until probed stops (replicas are
// few; one that left keeps an idle connection).
type peers struct {
	cl    *cluster.Cluster
	self  string
	creds credentials.TransportCredentials
	log   *slog.Logger

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // by address; guarded by mu
}

func newPeers(cl *cluster.Cluster, self string, sec *security, peerCA string, log *slog.Logger) *peers {
	p := &peers{cl: cl, self: self, log: log, conns: make(map[string]*grpc.ClientConn), creds: insecure.NewCredentials()}
	if sec.certs != nil {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		switch {
		case peerCA != "":
			if pool, err := loadPool(peerCA, "--peer-ca"); err == nil {
				tc.RootCAs = pool
			} else {
				log.Error("forwarding to other replicas: cannot read --peer-ca; using the system's roots", "err", err)
			}
		case sec.cfg.clientCA != "":
			if pool, err := loadPool(sec.cfg.clientCA, "--client-ca"); err == nil {
				tc.RootCAs = pool
			} else {
				log.Error("forwarding to other replicas: cannot read --client-ca; using the system's roots", "err", err)
			}
		}
		// With mutual TLS a replica presents its own certificate.
		tc.GetClientCertificate = sec.certs.ClientCertificate
		p.creds = credentials.NewTLS(tc)
	}
	return p
}

// Owner returns a connection to the replica that owns the target.
func (p *peers) Owner(_ context.Context, name string) (grpc.ClientConnInterface, string, error) {
	m, ok := p.cl.Owner(name)
	switch {
	case !ok:
		return nil, "", errors.New("no replica owns its shard")
	case m.ID == p.self:
		// The view has this replica's claim; the engine applies it at
		// the claim's position of the one log, perhaps not yet.
		return nil, "", &server.OwnedHereError{Position: keyspace.Position(p.cl.OwnedSince(name))}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[m.Addr]; ok {
		return c, m.ID, nil
	}
	c, err := grpc.NewClient(m.Addr, grpc.WithTransportCredentials(p.creds))
	if err != nil {
		return nil, "", fmt.Errorf("replica %s at %s: %w", m.ID, m.Addr, err)
	}
	p.conns[m.Addr] = c
	return c, m.ID, nil
}

func (p *peers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, c := range p.conns {
		if err := c.Close(); err != nil {
			p.log.Debug("closing a connection to a replica", "addr", addr, "err", err)
		}
	}
	p.conns = nil
}
