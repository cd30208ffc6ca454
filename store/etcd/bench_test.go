package etcd_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/keyspace"
	"github.com/probed/probed/internal/refused"
	"github.com/probed/probed/store/codec"
	"github.com/probed/probed/store/etcd"
	"github.com/probed/probed/store/storetest"
)

// startEtcd starts a one-member etcd that fsyncs as production etcd does
// (etcdtest's members do not), and returns a client of it.
func startEtcd(b *testing.B) *clientv3.Client {
	b.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "bench"
	cfg.Dir = b.TempDir()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = "error"
	client, peer := url.URL{Scheme: "http", Host: "127.0.0.1:0"}, url.URL{Scheme: "http", Host: refused.Reserve(b).Addr()}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		b.Fatal("etcd not ready after 30s")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{e.Clients[0].Addr().String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cli.Close() })
	return cli
}

// BenchmarkCommit: readiness transitions of distinct targets through
// etcd, fenced as in cluster mode (each target on a shard key of its own,
// on one real lease), one per transaction (batch=1) against a full batch
// (BatchLimits over a transition's ChangeCost: 62, the committer's group
// commit), with etcd fsyncing (fsync) and not (nofsync, as the tests run
// it): commits/s and transitions/s.
func BenchmarkCommit(b *testing.B) {
	runs := 0
	for _, fsync := range []bool{true, false} {
		var cli *clientv3.Client
		name := "fsync"
		if fsync {
			cli = startEtcd(b)
		} else {
			cli, name = etcdtest.Start(b).Client(b), "nofsync"
		}
		for _, batch := range []int{1, fullTransitions} {
			b.Run(fmt.Sprintf("%s/batch=%d", name, batch), func(b *testing.B) {
				runs++ // a prefix per run: -count runs again on the same etcd
				benchCommit(b, cli, fmt.Sprintf("/bench-%d/", runs), batch)
			})
		}
	}
}

func benchCommit(b *testing.B, cli *clientv3.Client, prefix string, batch int) {
	ctx := context.Background()
	names, shards := distinctShards("target-", batch, keyspace.DefaultShards)
	_, opts := member(b, cli, prefix, keyspace.DefaultShards, "bench", shards...)
	s := open(b, cli, opts)
	load(b, s) // the store reads its ownership
	last := make([]*engine.Change, batch)
	for i := range last {
		last[i] = create(names[i])
		last[i].Target.Spec = typicalSpec(last[i].Name)
		last[i].Event.Target = last[i].Target
	}
	// Created in batches the store takes (a create costs more than a
	// transition: its client's count).
	perCommit := maxCost(s) / s.ChangeCost(last[0])
	for i := 0; i < len(last); i += perCommit {
		commit(b, s, last[i:min(i+perCommit, len(last))]...)
	}
	commits := 0
	for n := 1; b.Loop(); n++ {
		for i, c := range last {
			last[i] = transition(c, n)
		}
		if err := s.Commit(ctx, last); err != nil {
			b.Fatal(err)
		}
		commits++
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(commits)/sec, "commits/s")
	b.ReportMetric(float64(commits*batch)/sec, "transitions/s")
}

// fullTransitions is the most transitions one Commit takes with etcd's
// defaults (BatchLimits' 125 operations, 2 a transition).
const fullTransitions = 62

// maxCost is the operations of changes one Commit of s takes.
func maxCost(s *etcd.Store) int {
	n, _ := s.BatchLimits()
	return n
}

// typicalSpec is a target as an activator registers one: an HTTP
// readiness probe every 500 ms and two labels.
func typicalSpec(name string) *target.Spec {
	ms := int32(500)
	return &target.Spec{
		Name:   name,
		Labels: map[string]string{"app": "checkout", "revision": "checkout-00042"},
		ReadinessProbe: &probe.Spec{
			Handler:            probe.Handler{HTTPGet: &probe.HTTPGet{Host: "10.12.34.56", Port: 8080, Path: "/healthz"}},
			PeriodMilliseconds: &ms, FailureThreshold: 3,
		},
	}
}

// BenchmarkStoredBytes measures etcd's database per stored target: 10,000
// targets created (batches of 63), then 10,000 transitions (so the history
// holds 20,000 events), then everything compacted; the database size
// after a defragmentation at each step, less an empty store's. Run it
// once: -benchtime=1x.
func BenchmarkStoredBytes(b *testing.B) {
	for _, tc := range []struct {
		name string
		spec func(string) *target.Spec
	}{
		{"typical", typicalSpec},
		{"every-feature", storetest.WebSpec},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := storedBytes(b, tc.name, tc.spec)
			for b.Loop() {
			}
			b.ReportMetric(0, "ns/op") // measured once, not per op
			b.ReportMetric(m.perTarget, "B/target")
			b.ReportMetric(m.perEvent, "B/event-in-history")
			b.ReportMetric(m.specBytes, "B/spec-value")
			b.ReportMetric(m.statusBytes, "B/status-value")
		})
	}
}

type storedSizes struct{ perTarget, perEvent, specBytes, statusBytes float64 }

// storedOnce holds the sizes measured, by case: once per process, however
// many times the benchmark runs.
var storedOnce sync.Map

func storedBytes(b *testing.B, key string, spec func(string) *target.Spec) storedSizes {
	if m, ok := storedOnce.Load(key); ok {
		return *m.(*storedSizes)
	}
	const targets = 10_000
	ctx := context.Background()
	cli := etcdtest.Start(b).Client(b)
	s := open(b, cli, etcd.Options{ReplicaID: "bench"})
	dbSize := func() int64 {
		ep := cli.Endpoints()[0]
		if _, err := cli.Defragment(ctx, ep); err != nil {
			b.Fatal(err)
		}
		st, err := cli.Status(ctx, ep)
		if err != nil {
			b.Fatal(err)
		}
		return st.DbSize
	}
	compact := func() {
		resp, err := cli.Get(ctx, "/")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
			b.Fatal(err)
		}
	}
	empty := dbSize()
	n, _ := s.BatchLimits()
	n /= s.ChangeCost(create("")) // creates per transaction
	all := make([]*engine.Change, 0, targets)
	for i := 0; i < targets; i += n {
		var batch []*engine.Change
		for j := i; j < min(i+n, targets); j++ {
			c := create(fmt.Sprintf("ns-%03d/target-%05d", j%100, j))
			c.Target.Spec = spec(c.Name)
			c.Target.Status = storetest.NewStatus(c.Target.Spec, at(0))
			c.Event.Target, c.Event.Labels = c.Target, c.Target.Spec.Labels
			batch = append(batch, c)
		}
		commit(b, s, batch...)
		all = append(all, batch...)
	}
	created := dbSize()
	for i := 0; i < targets; i += n {
		var batch []*engine.Change
		for j := i; j < min(i+n, targets); j++ {
			all[j] = transition(all[j], 1)
			batch = append(batch, all[j])
		}
		commit(b, s, batch...)
	}
	withHistory := dbSize()
	compact()
	steady := dbSize()
	specBytes, err := codec.MarshalSpec(all[0].Target.Spec)
	if err != nil {
		b.Fatal(err)
	}
	statusBytes, err := codec.MarshalStatus(&all[0].Target.Status)
	if err != nil {
		b.Fatal(err)
	}
	m := &storedSizes{
		perTarget:   float64(steady-empty) / targets,
		perEvent:    float64(withHistory-steady) / (2 * targets),
		specBytes:   float64(len(specBytes)),
		statusBytes: float64(len(statusBytes)),
	}
	b.Logf("%s: db %d B empty, %d B after %d creates, %d B with %d transitions more, %d B compacted",
		key, empty, created, targets, withHistory, targets, steady)
	storedOnce.Store(key, m)
	return *m
}
