package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/server"
	"github.com/probed/probed/store/bolt"
	probedtel "github.com/probed/probed/telemetry"
)

// backend is where probed keeps its state: one bbolt file (a single
// process, the default), or an etcd cluster shared by replicas
// (--store=etcd, cluster.go).
type backend struct {
	store engine.Store
	// forward and replicas are set in cluster mode only.
	forward  server.Forwarder
	replicas server.Replicas
	replica  string // this replica's id ("" on a single node)
	// mayProbe says whether the replica's lease is valid by its local
	// deadline (engine.Options.MayProbe); nil on a single node.
	mayProbe func() bool
	// health is the replica's serving status for the health service;
	// nil on a single node.
	health *healthSwitch
	// join runs cluster membership (claims, releases, the lease) until
	// ctx is done, then leaves gracefully; nil on a single node.
	join func(ctx context.Context, eng *engine.Engine) error
	// resumeEvery is how often the replica looks for interrupted applies
	// to finish (server.ResumeApplies); 0 on a single node.
	resumeEvery time.Duration
	// stats are the cluster's figures for metrics; nil on a single node.
	stats func() probedtel.ClusterStats
	// close closes the store (and the etcd client): once, whoever calls
	// it first, the others waiting for it.
	close func()
	// where names the store in the "serving" log line.
	where []any
}

// openBackend opens the store cfg names.
func openBackend(ctx context.Context, cfg *config, sec *security, tel *telemetry, log *slog.Logger) (*backend, error) {
	open := openBolt
	if cfg.cluster.store == storeEtcd {
		open = openCluster
	}
	b, err := open(ctx, cfg, sec, tel, log)
	if err != nil {
		return nil, err
	}
	b.close = sync.OnceFunc(b.close)
	return b, nil
}

// openBolt opens the single-node store: a bbolt file under --data-dir.
func openBolt(_ context.Context, cfg *config, _ *security, _ *telemetry, log *slog.Logger) (*backend, error) {
	store, err := bolt.Open(cfg.dataDir, bolt.WithLogger(log))
	if err != nil {
		return nil, err
	}
	return &backend{
		store: store,
		close: func() {
			if err := store.Close(); err != nil {
				log.Error("closing the store", "err", err)
			}
		},
		where: []any{"data_dir", cfg.dataDir},
	}, nil
}
