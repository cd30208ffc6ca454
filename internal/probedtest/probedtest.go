// Package probedtest starts a real probed (engine, checkers, store and
// gRPC server with health and reflection) on a loopback port for tests,
// the way net/http/httptest starts an HTTP server.
package probedtest

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/server"
	"github.com/probed/probed/store/memory"
)

// Options tune the server; the zero value is a real-clock server over a
// memory store with default engine options.
type Options struct {
	// Clock drives the engine and the server (a *clockwork.FakeClock makes
	// probe timing deterministic). Default: the real clock.
	Clock clockwork.Clock
	// Store defaults to a new memory store.
	Store engine.Store
	// Engine is applied over the defaults (Clock, Store and Checkers are
	// filled in when unset).
	Engine engine.Options
	// Checks configures the checkers (AllowExec etc.).
	Checks check.Options
	// Server configures the gRPC adapter.
	Server server.Options
	// GRPC are extra server options (interceptors, credentials).
	GRPC []grpc.ServerOption
	// Addr is the address to listen on; default "127.0.0.1:0". Passing the
	// Addr of a stopped server restarts probed where clients expect it.
	Addr string
}

// Server is a running probed.
type Server struct {
	Addr   string
	Engine *engine.Engine
	Clock  clockwork.Clock
	Store  engine.Store
	// Conn is a plaintext client connection to Addr.
	Conn *grpc.ClientConn

	stop func()
}

// Start starts a probed and stops it when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.Store == nil {
		opts.Store = memory.New(1)
	}
	eo := opts.Engine
	if eo.Clock == nil {
		eo.Clock = opts.Clock
	}
	eo.Store = opts.Store
	if eo.Checkers == nil {
		eo.Checkers = check.New(opts.Checks)
	}
	if opts.Checks.AllowExec {
		eo.AllowExec = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	eng, err := engine.Open(ctx, eo)
	if err != nil {
		cancel()
		t.Fatalf("probedtest: open engine: %v", err)
	}
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		cancel()
		t.Fatalf("probedtest: listen: %v", err)
	}
	so := opts.Server
	if so.Clock == nil {
		so.Clock = opts.Clock
	}
	g := grpc.NewServer(slices.Concat(opts.GRPC, server.GRPCOptions())...)
	if so.Addr == "" {
		so.Addr = lis.Addr().String()
	}
	server.New(eng, so).Register(g)
	healthpb.RegisterHealthServer(g, health.NewServer())
	reflection.Register(g)

	var wg sync.WaitGroup
	runErr := make(chan error, 1)
	wg.Go(func() { runErr <- eng.Run(ctx) })
	wg.Go(func() { _ = g.Serve(lis) })

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		cancel()
		t.Fatalf("probedtest: dial: %v", err)
	}
	s := &Server{Addr: lis.Addr().String(), Engine: eng, Clock: opts.Clock, Store: opts.Store, Conn: conn}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			_ = conn.Close()
			cancel()
			if err := <-runErr; err != nil {
				t.Errorf("probedtest: engine: %v", err)
			}
			stopped := make(chan struct{})
			go func() { g.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
				g.Stop()
			}
			wg.Wait()
		})
	}
	t.Cleanup(s.stop)
	return s
}

// Stop stops the server now (it is also stopped when the test ends). The
// store is left open so a test can start another server over it, as a
// restart would.
func (s *Server) Stop() { s.stop() }
