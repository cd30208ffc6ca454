// Command activator is a Knative-style activator built on probed: it
// forwards HTTP requests to backends, holding each request whose backend
// is not known to be ready until probed reports it ready. Requests are
// routed by Host ("hello" or "hello.example.com" goes to backend hello)
// or by the first path segment ("/hello/x" goes to "/x" on hello).
//
//	activator --probed 127.0.0.1:50051 --backend hello=127.0.0.1:8081
//
// probed must accept the initial period: run it with --min-period=50ms
// (or pass a longer --initial-period).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/probed/probed/client"
	"github.com/probed/probed/examples/activator/proxy"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "activator:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		o        proxy.Options
		backends []proxy.Backend
	)
	listen := flag.String("listen", "127.0.0.1:8080", "HTTP listen address")
	addr := flag.String("probed", envOr("PROBED_ADDR", "127.0.0.1:50051"), "probed's gRPC address (env PROBED_ADDR)")
	flag.Func("backend", "a backend, name=host:port (repeatable)", func(s string) error {
		b, err := proxy.ParseBackend(s)
		backends = append(backends, b)
		return err
	})
	flag.DurationVar(&o.InitialPeriod, "initial-period", proxy.DefaultInitialPeriod, "probe period until a backend is first ready (probed's --min-period must allow it)")
	flag.DurationVar(&o.Period, "period", proxy.DefaultPeriod, "probe period once a backend has been ready")
	flag.DurationVar(&o.Timeout, "timeout", proxy.DefaultTimeout, "probe timeout")
	failures := flag.Int("failure-threshold", 0, "failed probes that make a ready backend unready (0: probed's default, 3)")
	flag.DurationVar(&o.HoldTimeout, "hold-timeout", proxy.DefaultHoldTimeout, "longest wait for a backend to become ready")
	flag.DurationVar(&o.IdleTimeout, "idle", 0, "delete the target of a backend idle this long (0: never)")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if len(backends) == 0 {
		return errors.New("no --backend given")
	}
	o.FailureThreshold = int32(min(max(*failures, 0), 1<<20))
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "activator")
	o.Logger = log

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := client.Dial(ctx, *addr)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	p, err := proxy.New(c, backends, o)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		_ = p.Close(ctx)
		return err
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	log.Info("activator serving", "addr", lis.Addr().String(), "probed", *addr, "backends", len(backends))
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Close first: the held requests then fail at once instead of
	// keeping Shutdown waiting.
	cerr := p.Close(sctx)
	_ = srv.Shutdown(sctx)
	log.Info("activator stopped", "stats", fmt.Sprintf("%+v", p.Stats()))
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return cerr
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
