package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/server"
	"github.com/probed/probed/ui"
)

// uiConfig holds the status page flags.
type uiConfig struct {
	addr     string
	timeline time.Duration
	// listening, if set, is called with the status page's listener
	// address once it listens (tests).
	listening func(net.Addr)
}

func (c *uiConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "ui-addr", "", "listen address of the status page, e.g. 127.0.0.1:8080 (empty: no status page)")
	fs.DurationVar(&c.timeline, "ui-timeline", ui.DefaultTimelineWindow, "how far back the status page's readiness timelines go")
}

func (c *uiConfig) validate() error {
	if c.timeline <= 0 {
		return fmt.Errorf("--ui-timeline %v: must be positive", c.timeline)
	}
	if c.addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.addr); err != nil {
		return fmt.Errorf("--ui-addr %q: %w", c.addr, err)
	}
	return nil
}

// startUI serves the status page until ctx is done (nothing when it is
// off); the returned function waits for it to stop. apiAddr is the gRPC
// API's address, shown on the page.
func startUI(ctx context.Context, cfg *config, eng *engine.Engine, be *backend, sec *security, apiAddr string, log *slog.Logger) (wait func(), err error) {
	if cfg.ui.addr == "" {
		return func() {}, nil
	}
	lis, err := sec.listenHTTP("--ui-addr", cfg.ui.addr)
	if err != nil {
		return nil, fmt.Errorf("listen on --ui-addr %s: %w", cfg.ui.addr, err)
	}
	sec.listening("--ui-addr", lis.Addr())
	if cfg.ui.listening != nil {
		cfg.ui.listening(lis.Addr())
	}
	opts := ui.Options{Logger: log, TargetJSON: server.TargetJSON, TimelineWindow: cfg.ui.timeline, Visible: sec.readFilter(),
		About: ui.About{Version: buildVersion(), Addr: apiAddr}}
	if be.replicas != nil {
		opts.Cluster = pageCluster{be.replicas, be.replica}
	}
	page := ui.New(eng, opts)
	srv := &http.Server{
		Handler:           sec.protectOn(lis, sec.readersOnly(page)),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// Requests end with ctx, so event streams end when probed stops.
		BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// With TLS the page shares the API's certificate and client CA, so a
	// browser's client certificate authenticates it as it does a client.
	scheme, serveFn := "http", func() error { return srv.Serve(lis) }
	if tc := sec.tlsConfig(); tc != nil {
		srv.TLSConfig = tc
		scheme, serveFn = "https", func() error { return srv.ServeTLS(lis, "", "") }
	}
	var wg sync.WaitGroup
	wg.Go(func() { page.Run(ctx) })
	wg.Go(func() {
		if err := serveFn(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("status page stopped", "err", err)
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.grace)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("status page: shutdown", "err", err)
			_ = srv.Close()
		}
	})
	log.Info("status page serving", "addr", lis.Addr().String(), "url", scheme+"://"+lis.Addr().String()+"/")
	return wg.Wait, nil
}

// pageCluster shows the cluster's replicas on the status page.
type pageCluster struct {
	replicas server.Replicas
	self     string
}

func (c pageCluster) OwnerOf(name string) string { return c.replicas.OwnerOf(name) }
func (c pageCluster) Self() string               { return c.self }
func (c pageCluster) Shards() int                { return c.replicas.Shards() }

func (c pageCluster) Members() []ui.Member {
	rs := c.replicas.Members()
	out := make([]ui.Member, len(rs))
	for i, r := range rs {
		out[i] = ui.Member{ID: r.ID, Addr: r.Addr, Shards: r.Shards, Joined: r.Joined}
	}
	return out
}
