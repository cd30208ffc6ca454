package etcd_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/store/etcd"
)

// BenchmarkCountedCreates measures what the cluster-wide target limits
// cost (issue 33): creates through engines over etcd stores that count
// the targets in each create's transaction (counted) and that do not
// (uncounted, the code before: etcd.CountNothing), side by side, with
// one replica and with three replicas over the same etcd (the creates of
// three replicas compare the same counts and refuse each other's
// transactions, which are then sent again). 256 goroutines create at
// once, spread over the replicas, as 8 clients. It reports creates/s,
// the bytes of the average transaction etcd received (the TxnRequest's
// encoded size), creates per transaction sent, and the transactions sent
// per Commit (above 1: sent again after a count moved). One fsyncing
// etcd, embedded.
func BenchmarkCountedCreates(b *testing.B) {
	endpoints := startEtcd(b).Endpoints()
	runs := 0
	for _, replicas := range []int{1, 3} {
		for _, mode := range []string{"uncounted", "counted"} {
			b.Run(fmt.Sprintf("replicas=%d/%s", replicas, mode), func(b *testing.B) {
				runs++ // a prefix per run: -count runs again on the same etcd
				prefix := fmt.Sprintf("/counted-%d/", runs)
				var txns, txnBytes atomic.Int64
				engines := make([]*engine.Engine, replicas)
				for i := range engines {
					cli := measuredClient(b, endpoints, &txns, &txnBytes)
					s := open(b, cli, etcd.Options{Prefix: prefix, ReplicaID: fmt.Sprintf("r%d", i)})
					if mode == "uncounted" {
						etcd.CountNothing(s)
					}
					engines[i] = countedEngine(b, s)
				}
				var n, commits atomic.Int64
				b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
				var caller atomic.Int64
				startTxns, startBytes := txns.Load(), txnBytes.Load()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := caller.Add(1)
					eng := engines[int(i)%len(engines)]
					ctx := engine.WithClient(context.Background(), fmt.Sprintf("tenant-%d", i%8))
					for pb.Next() {
						if _, err := eng.Create(ctx, typicalSpec(fmt.Sprintf("bench-%d", n.Add(1)))); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				for _, eng := range engines {
					commits.Add(int64(eng.Stats().Commits))
				}
				sent, bytes := txns.Load()-startTxns, txnBytes.Load()-startBytes
				b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "creates/s")
				b.ReportMetric(float64(bytes)/float64(max(sent, 1)), "bytes/txn")
				b.ReportMetric(float64(n.Load())/float64(max(sent, 1)), "creates/txn")
				b.ReportMetric(float64(sent)/float64(max(commits.Load(), 1)), "txns/commit")
			})
		}
	}
}

// measuredClient is a client of endpoints that counts the transactions
// it sends and their encoded bytes.
func measuredClient(b *testing.B, endpoints []string, txns, bytes *atomic.Int64) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if m, ok := req.(proto.Message); ok && method == "/etcdserverpb.KV/Txn" {
					txns.Add(1)
					bytes.Add(int64(proto.Size(m)))
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			}),
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cli.Close() })
	return cli
}

// countedEngine runs an engine over s, owning every target, with limits
// no benchmark reaches, until b ends.
func countedEngine(b *testing.B, s *etcd.Store) *engine.Engine {
	ctx, cancel := context.WithCancel(context.Background())
	eng, err := engine.Open(ctx, engine.Options{
		Clock: clockwork.NewFakeClock(), Store: s, Checkers: check.New(check.Options{}),
		Shards: 1, MaxTargets: 1 << 30, MaxTargetsPerClient: 1 << 30,
		MayProbe: func() bool { return false },
	})
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	<-eng.Running()
	return eng
}
