package xds_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/store/memory"
	"github.com/probed/probed/xds"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// probedXDS is a real engine and xDS server on a loopback port.
type probedXDS struct {
	eng  *engine.Engine
	srv  *xds.Server
	addr string
	stop func()
}

// setup configures startXDS.
type setup struct {
	store engine.Store
	clock clockwork.Clock
	opts  xds.Options
}

// startXDS starts an engine (real clock, 10 ms floors, memory store
// unless given) and the xDS server; they stop when the test ends. The
// caller's identity is the metadata "identity" (a stand-in for the
// authentication interceptors, which cmd/probed's tests run for real).
func startXDS(t *testing.T, s setup) *probedXDS {
	t.Helper()
	if s.store == nil {
		s.store = memory.New(1)
	}
	if s.clock == nil {
		s.clock = clockwork.NewRealClock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	eng, err := engine.Open(ctx, engine.Options{
		Clock: s.clock, Store: s.store, Checkers: check.New(check.Options{}),
		MinPeriod: 10 * time.Millisecond, MinTimeout: 10 * time.Millisecond,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	srv := xds.New(eng, s.opts)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		md, _ := metadata.FromIncomingContext(ss.Context())
		id := "anonymous"
		if v := md.Get("identity"); len(v) == 1 {
			id = v[0]
		}
		return handler(srv, identityStream{ss, engine.WithClient(ss.Context(), id)})
	}))
	srv.Register(g)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := eng.Run(ctx); err != nil {
			t.Errorf("engine: %v", err)
		}
	})
	wg.Go(func() {
		if err := srv.Run(ctx); err != nil {
			t.Errorf("xds: %v", err)
		}
	})
	wg.Go(func() { _ = g.Serve(lis) })
	p := &probedXDS{eng: eng, srv: srv, addr: lis.Addr().String()}
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			cancel()
			g.Stop()
			wg.Wait()
		})
	}
	t.Cleanup(p.stop)
	return p
}

type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s identityStream) Context() context.Context { return s.ctx }

// create creates a target, failing the test on error.
func (p *probedXDS) create(t *testing.T, spec *target.Spec) {
	t.Helper()
	if _, err := p.eng.Create(context.Background(), spec); err != nil {
		t.Fatalf("create %s: %v", spec.Name, err)
	}
}

// waitReady waits until the named targets' readiness is ready.
func (p *probedXDS) waitReady(t *testing.T, ready bool, names ...string) {
	t.Helper()
	for _, name := range names {
		poll.Until(t, name+" readiness", 10*time.Second, func() bool {
			tg, err := p.eng.Get(context.Background(), name)
			return err == nil && tg.Status.Ready() == ready
		})
	}
}

// tcpTarget is a target whose readiness probe connects to host:port
// every 10 ms, with labels.
func tcpTarget(name, host string, port int32, labels map[string]string) *target.Spec {
	ms := int32(-990)
	return &target.Spec{Name: name, Labels: labels, ReadinessProbe: &probe.Spec{
		Handler:            probe.Handler{TCPSocket: &probe.TCPSocket{Host: host, Port: port}},
		PeriodSeconds:      1,
		PeriodMilliseconds: &ms,
		TimeoutSeconds:     1,
	}}
}

// httpTarget is tcpTarget with an HTTP probe of /healthz.
func httpTarget(name string, port int32, labels map[string]string) *target.Spec {
	s := tcpTarget(name, "", 0, labels)
	s.ReadinessProbe.Handler = probe.Handler{HTTPGet: &probe.HTTPGet{Host: "127.0.0.1", Port: port, Path: "/healthz"}}
	return s
}

func service(name string) map[string]string { return map[string]string{xds.LabelService: name} }

// adsClient is a raw ADS client: it sends requests and reads responses
// as an xDS client would, and checks them.
type adsClient struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse]
	resps  chan *discovery.DiscoveryResponse
	errs   chan error
}

// dialADS opens a State of the World ADS stream as identity.
func dialADS(t *testing.T, addr, identity string) *adsClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "identity", identity))
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &adsClient{t: t, stream: stream, resps: make(chan *discovery.DiscoveryResponse, 100), errs: make(chan error, 1)}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				c.errs <- err
				return
			}
			c.resps <- r
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = conn.Close()
	})
	return c
}

// request sends a request of typ for names (none: wildcard), with the
// version and nonce it acknowledges, or rejects when nack is set.
func (c *adsClient) request(typ string, names []string, version, nonce, nack string) {
	c.t.Helper()
	req := &discovery.DiscoveryRequest{
		Node:          nodeOf("test-node"),
		TypeUrl:       typ,
		ResourceNames: names,
		VersionInfo:   version,
		ResponseNonce: nonce,
	}
	if nack != "" {
		req.ErrorDetail = statusOf(nack)
	}
	if err := c.stream.Send(req); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// next returns the next response (within 10 s).
func (c *adsClient) next() *discovery.DiscoveryResponse {
	c.t.Helper()
	select {
	case r := <-c.resps:
		return r
	case err := <-c.errs:
		c.t.Fatalf("stream ended: %v", err)
	case <-time.After(10 * time.Second):
		c.t.Fatal("no response in 10s")
	}
	return nil
}

// quiet checks that no response comes for a while. The bound: a push
// leaves within microseconds of the event that causes it, and nothing
// happens meanwhile, so 300 ms of silence means none is coming.
func (c *adsClient) quiet() {
	c.t.Helper()
	select {
	case r := <-c.resps:
		c.t.Fatalf("unexpected response: type %s version %s, %d resources", r.GetTypeUrl(), r.GetVersionInfo(), len(r.GetResources()))
	case <-time.After(300 * time.Millisecond):
	}
}

// ack acknowledges r, naming names.
func (c *adsClient) ack(r *discovery.DiscoveryResponse, names ...string) {
	c.request(r.GetTypeUrl(), names, r.GetVersionInfo(), r.GetNonce(), "")
}
