package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/server"
	"github.com/probed/probed/store/bolt"
)

// serve runs probed until ctx is done: it opens the store, the engine and
// the gRPC server, calls ready (if not nil) with the address it listens
// on, and on ctx's end shuts down gracefully: the engine first (Watch
// streams end with Unavailable), then the gRPC server.
func serve(ctx context.Context, cfg *config, ready func(addr net.Addr)) error {
	log := newLogger(cfg)
	store, err := bolt.Open(cfg.dataDir, bolt.WithLogger(log))
	if err != nil {
		return err
	}
	defer func() {
		if err := store.Close(); err != nil {
			log.Error("closing the store", "err", err)
		}
	}()

	sec, err := newSecurity(cfg, log)
	if err != nil {
		return err
	}
	defer sec.close()
	tel, err := startTelemetry(ctx, cfg, sec, log)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tel.shutdown(sctx); err != nil {
			log.Error("stopping telemetry", "err", err)
		}
	}()

	checkOpts := check.Options{UserAgent: "probed/" + version, AllowExec: cfg.allowExec, Inject: tel.inject()}
	engOpts := engine.Options{
		Clock:            clockwork.NewRealClock(),
		Store:            store,
		Observer:         tel.engineObserver(),
		Logger:           log,
		Gates:            cfg.gates,
		MinPeriod:        cfg.minPeriod,
		MinTimeout:       cfg.minTimeout,
		AllowExec:        cfg.allowExec,
		History:          cfg.history,
		HistoryBytes:     cfg.historyBytes,
		WatchBuffer:      cfg.watchBuffer,
		WatchBufferBytes: byteBound(cfg.watchBytes),
		WatchTotalBytes:  byteBound(cfg.watchTotal),
		MaxTargets:       cfg.maxTargets,
		MaxInflight:      cfg.maxInflight,
		Tick:             cfg.tick,
	}
	sec.configure(&engOpts, &checkOpts)
	engOpts.Checkers = check.New(checkOpts)
	eng, err := engine.Open(ctx, engOpts)
	if err != nil {
		return err
	}
	if err := tel.observe(eng); err != nil {
		return err
	}

	lis, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen on --addr %s: %w", cfg.addr, err)
	}
	// The service's own options after authentication's (GRPCOptions).
	g := grpc.NewServer(slices.Concat(sec.grpcOptions(), tel.grpcOptions(), server.GRPCOptions())...)
	server.New(eng, server.Options{Logger: log, Observer: tel.serverObserver()}).Register(g)
	healthSrv := health.NewServer()
	healthpb.RegisterHealthServer(g, healthSrv)
	reflection.Register(g)

	engineCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	var wg sync.WaitGroup
	engineErr := make(chan error, 1)
	wg.Go(func() { engineErr <- eng.Run(engineCtx) })
	serveErr := make(chan error, 1)
	wg.Go(func() { serveErr <- g.Serve(lis) })
	waitUI, err := startUI(engineCtx, cfg, eng, sec, log)
	if err != nil {
		stopEngine()
		g.Stop()
		wg.Wait()
		return err
	}

	log.Info("probed serving", "addr", lis.Addr().String(), "data_dir", cfg.dataDir, "feature_gates", cfg.gates.String(), "version", version)
	if ready != nil {
		ready(lis.Addr())
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case runErr = <-engineErr:
		engineErr <- runErr
	case runErr = <-serveErr:
		serveErr <- runErr
	}
	healthSrv.Shutdown()
	stopEngine()
	if err := <-engineErr; err != nil && runErr == nil {
		runErr = err
	}
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(cfg.grace):
		log.Warn("graceful shutdown timed out; closing connections", "grace", cfg.grace)
		g.Stop()
		<-stopped
	}
	wg.Wait()
	waitUI()
	if err := <-serveErr; err != nil && !errors.Is(err, grpc.ErrServerStopped) && runErr == nil {
		runErr = err
	}
	return runErr
}

func newLogger(cfg *config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.logLevel}
	if cfg.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
