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
	"google.golang.org/grpc/reflection"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/server"
)

// serve runs probed until ctx is done: it opens the store, the engine and
// the gRPC server, calls ready (if not nil) with the address it listens
// on, and on ctx's end shuts down gracefully: the engine first (Watch
// streams end with Unavailable), then the gRPC server.
func serve(ctx context.Context, cfg *config, ready func(addr net.Addr)) error {
	log := newLogger(cfg)
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

	// Loading the store and taking every target in hand grow the heap
	// from nothing to its working size: collect less often until the
	// engine runs.
	endStartupGC := startupGC()
	defer endStartupGC()
	be, err := openBackend(ctx, cfg, sec, tel, log)
	if err != nil {
		return err
	}
	defer be.close()

	// grpc.health.v1 says NOT_SERVING while the store cannot write (a
	// full disk): probing goes on, but creates, updates and deletes are
	// refused until it can again.
	healthSrv := newHealth()
	if cfg.allowExec && (cfg.subreaper || os.Getpid() == 1) {
		// As PID 1 (a container) probed adopts every orphan: the
		// children exec probes leave behind must be reaped here, or they
		// stay zombies. Stopped last, once no probe runs.
		stopReaper, err := check.StartReaper(log)
		if err != nil {
			return err
		}
		defer stopReaper()
	}
	checkOpts := check.Options{
		UserAgent: "probed/" + buildVersion(), AllowExec: cfg.allowExec, Inject: tel.inject(),
		GRPCDialPerProbe: cfg.grpcConns == "per-probe",
	}
	engOpts := engine.Options{
		Clock:            clockwork.NewRealClock(),
		Store:            be.store,
		MayProbe:         be.mayProbe,
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
		OnStoreError:     healthSrv.storeError,
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
	if be.stats != nil {
		if err := tel.observeCluster(be.stats); err != nil {
			return err
		}
	}

	lis, err := sec.listen(cfg.addr)
	if err != nil {
		return fmt.Errorf("listen on --addr %s: %w", cfg.addr, err)
	}
	if err := tel.observeConnections(sec.connectionStats); err != nil {
		_ = lis.Close()
		return err
	}
	// The per-call metrics first (a call refused by authentication counts
	// too), the service's own options after authentication's
	// (GRPCOptions).
	g := grpc.NewServer(slices.Concat(tel.grpcOptions(), sec.grpcOptions(), server.GRPCOptions())...)
	srv := server.New(eng, sec.serverOptions(server.Options{
		Logger:    log,
		Observer:  tel.serverObserver(),
		Forwarder: be.forward,
		Replicas:  be.replicas,
		ReplicaID: be.replica,
		Addr:      lis.Addr().String(),
	}))
	srv.Register(g)
	if be.health != nil {
		// In cluster mode, NOT_SERVING while the replica's lease is lost.
		be.health.attach(func(serving bool) { healthSrv.set("lease", !serving) })
	}
	reflection.Register(g)
	healthSrv.register(g) // last: it answers for every service above

	engineCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	var wg sync.WaitGroup
	engineErr := make(chan error, 1)
	wg.Go(func() { engineErr <- eng.Run(engineCtx) })
	wg.Go(func() {
		select {
		case <-eng.Running():
			endStartupGC()
			releaseStartupHeap()
		case <-engineCtx.Done():
			endStartupGC()
		}
	})
	serveErr := make(chan error, 1)
	wg.Go(func() { serveErr <- g.Serve(lis) })
	// Cluster membership starts once the engine runs (it takes shards, and
	// so targets, into it) and stops first (it hands them over).
	clusterCtx, stopCluster := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCluster()
	clusterErr := make(chan error, 1)
	if be.join != nil {
		wg.Go(func() { clusterErr <- be.join(clusterCtx, eng) })
	}
	if be.resumeEvery > 0 {
		// Stops with the membership; an apply it runs then ends with
		// the engine (or its lock, at the lease's revocation).
		wg.Go(func() { srv.ResumeApplies(clusterCtx, be.resumeEvery) })
	}
	waitUI, err := startUI(engineCtx, cfg, eng, be, sec, lis.Addr().String(), log)
	if err != nil {
		stopCluster()
		stopEngine()
		g.Stop()
		wg.Wait()
		return err
	}

	stopXDS, err := startXDS(engineCtx, cfg, eng, sec, tel, log)
	if err != nil {
		stopCluster()
		stopEngine()
		g.Stop()
		wg.Wait()
		waitUI()
		return err
	}

	// Written at every --log-level: whoever started probed waits for it.
	log.InfoContext(announcing(ctx), "probed serving", append([]any{"addr", lis.Addr().String(), "feature_gates", cfg.gates.String(), "version", buildVersion()}, be.where...)...)
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
	case runErr = <-clusterErr:
		if runErr == nil {
			runErr = errors.New("cluster membership stopped")
		}
		clusterErr <- nil
	}
	healthSrv.shutdown()
	// The whole shutdown gets --shutdown-grace. Leaving the cluster and
	// the engine's last flush need the store; if it cannot answer (etcd
	// unreachable) in time, closing it ends what waits on it, and the
	// engine logs the changes it could not write.
	deadline := time.Now().Add(cfg.grace)
	abort := time.AfterFunc(cfg.grace, func() {
		log.Warn("shutdown: the grace period passed with the store still busy; closing it", "grace", cfg.grace)
		be.close()
	})
	defer abort.Stop()
	if be.join != nil {
		stopCluster()
		if err := <-clusterErr; err != nil && runErr == nil {
			runErr = err
		}
	}
	stopEngine()
	if err := <-engineErr; err != nil && runErr == nil {
		runErr = err
	}
	stopXDS(deadline)
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(max(time.Until(deadline), 0)):
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

func newLogger(cfg *config) *slog.Logger { return newLoggerTo(os.Stderr, cfg) }
