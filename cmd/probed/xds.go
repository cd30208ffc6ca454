package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/xds"
)

// xdsFlag is the flag of the xDS listener.
const xdsFlag = "--xds-addr"

// xdsConfig holds the xDS flags.
type xdsConfig struct {
	addr        string
	sendUnready bool
	staleAfter  time.Duration
	maxStreams  int
	// listening, if set, is called with the xDS listener's address once
	// it listens (tests).
	listening func(net.Addr)
}

func (c *xdsConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "xds-addr", "", "listen address of the xDS server (ADS, for gRPC xds:/// clients and Envoy), e.g. 127.0.0.1:18000; same TLS, tokens and --authz-policy as the API (empty: off)")
	fs.BoolVar(&c.sendUnready, "xds-send-unready", false, "send the endpoints of targets that are not ready as UNHEALTHY (DRAINING while terminating) instead of leaving them out")
	fs.DurationVar(&c.staleAfter, "xds-endpoint-stale-after", 0, "endpoint_stale_after of every assignment (Envoy marks endpoints unhealthy when probed sent nothing for this long), and assignments are sent again every third of it (0: off)")
	fs.IntVar(&c.maxStreams, "xds-max-streams", xds.DefaultMaxStreams, "maximum number of xDS streams open at once (0: no limit)")
}

func (c *xdsConfig) validate() error {
	switch {
	case c.staleAfter < 0:
		return fmt.Errorf("--xds-endpoint-stale-after %v: must not be negative", c.staleAfter)
	case c.staleAfter > 0 && c.staleAfter < 300*time.Millisecond:
		return fmt.Errorf("--xds-endpoint-stale-after %v: must be at least 300ms (assignments are sent again every third of it)", c.staleAfter)
	case c.maxStreams < 0:
		return fmt.Errorf("--xds-max-streams %d: must not be negative", c.maxStreams)
	case c.addr == "":
		return nil
	}
	if _, _, err := net.SplitHostPort(c.addr); err != nil {
		return fmt.Errorf("--xds-addr %q: %w", c.addr, err)
	}
	return nil
}

// startXDS serves xDS until ctx is done or the engine stops (nothing when
// it is off); the returned function stops it, gracefully until deadline.
func startXDS(ctx context.Context, cfg *config, eng *engine.Engine, sec *security, tel *telemetry, log *slog.Logger) (stop func(deadline time.Time), err error) {
	if cfg.xds.addr == "" {
		return func(time.Time) {}, nil
	}
	lis, err := sec.listenGRPC(cfg.xds.addr)
	if err != nil {
		return nil, fmt.Errorf("listen on --xds-addr %s: %w", cfg.xds.addr, err)
	}
	srv := xds.New(eng, xds.Options{
		Authorizer:         sec.authorizer(),
		Logger:             log,
		SendUnready:        cfg.xds.sendUnready,
		EndpointStaleAfter: cfg.xds.staleAfter,
		MaxStreams:         cfg.xds.maxStreams,
	})
	if err := tel.observeXDS(srv.Stats); err != nil {
		_ = lis.Close()
		return nil, err
	}
	g := grpc.NewServer(slices.Concat(sec.grpcOptionsOn(lis), tel.grpcOptions())...)
	srv.Register(g)
	if cfg.xds.listening != nil {
		cfg.xds.listening(lis.Addr())
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Run(runCtx); err != nil {
			log.Error("xds: stopped", "err", err)
		}
	})
	wg.Go(func() {
		if err := g.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			log.Error("xds: serving stopped", "err", err)
		}
	})
	log.Info("xds serving", "addr", lis.Addr().String())
	return func(deadline time.Time) {
		// The streams end with Unavailable when Run returns; then the
		// connections close.
		cancel()
		stopped := make(chan struct{})
		go func() { g.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(max(time.Until(deadline), 0)):
			g.Stop()
			<-stopped
		}
		wg.Wait()
	}, nil
}
