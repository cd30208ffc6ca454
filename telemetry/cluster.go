package telemetry

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
)

// Metric names of cluster mode.
const (
	MetricClusterShards    = "probed_cluster_owned_shards"
	MetricClusterMembers   = "probed_cluster_members"
	MetricClusterRenewals  = "probed_cluster_lease_renewals_total"
	MetricClusterLosses    = "probed_cluster_lease_losses_total"
	MetricClusterHandovers = "probed_cluster_shard_changes_total"
)

// ClusterStats are the figures of a replica of a cluster (probed
// --store=etcd).
type ClusterStats struct {
	OwnedShards, Members int
	// Renewals of the lease, and renewals skipped because the scheduler's
	// heartbeat failed (a replica alive but stuck).
	Renewals, RenewalsSkipped uint64
	// Losses: times the replica lost its lease (and so every shard).
	Losses uint64
	// Claims and Releases of shards.
	Claims, Releases uint64
}

// ObserveCluster reports the cluster's figures read from stats, once per
// collection.
func (t *Telemetry) ObserveCluster(stats func() ClusterStats) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shut {
		return errors.New("telemetry: observe after shutdown")
	}
	obs := observables{meter: t.meter}
	shards := obs.gauge(MetricClusterShards, "Shards this replica owns: it probes their targets.")
	members := obs.gauge(MetricClusterMembers, "Live replicas of the cluster, as this one sees them.")
	renewals := obs.counter(MetricClusterRenewals, "Lease renewals: result renewed, or skipped (the scheduler's heartbeat failed: the replica will lose its shards).")
	losses := obs.counter(MetricClusterLosses, "Times this replica lost its lease, and so every shard (partition, etcd down, stuck).")
	changes := obs.counter(MetricClusterHandovers, "Shards this replica claimed (change=claim) or released (change=release).")
	if err := obs.err; err != nil {
		return fmt.Errorf("telemetry: observe cluster: %w", err)
	}
	attrs := func(k, v string) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String(k, v)))
	}
	renewed, skipped := attrs("result", "renewed"), attrs("result", "skipped")
	claim, release := attrs("change", "claim"), attrs("change", "release")
	_, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := stats()
		o.ObserveInt64(shards, int64(s.OwnedShards))
		o.ObserveInt64(members, int64(s.Members))
		o.ObserveInt64(renewals, clampInt64(s.Renewals), renewed)
		o.ObserveInt64(renewals, clampInt64(s.RenewalsSkipped), skipped)
		o.ObserveInt64(losses, clampInt64(s.Losses))
		o.ObserveInt64(changes, clampInt64(s.Claims), claim)
		o.ObserveInt64(changes, clampInt64(s.Releases), release)
		return nil
	}, shards, members, renewals, losses, changes)
	if err != nil {
		return fmt.Errorf("telemetry: observe cluster: %w", err)
	}
	return nil
}

// GRPCClientOptions instrument a gRPC client (probed's etcd client): the
// rpc.client metrics per call — etcd's request latency by method — and
// spans. None when nothing collects them.
func (t *Telemetry) GRPCClientOptions() []grpc.DialOption {
	if !t.instrument {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(t.tracers),
		otelgrpc.WithMeterProvider(t.meters),
		otelgrpc.WithPropagators(t.propagator),
	))}
}
