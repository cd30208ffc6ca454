package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/refused"
	"github.com/probed/probed/internal/tcpproxy"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestClusterPartitionedReplica: a replica cut off from etcd (a paused
// proxy between it and etcd: its packets go nowhere) stops vouching for
// its view within a lease TTL: grpc.health.v1 answers NOT_SERVING, its
// Watch streams end with Unavailable (so clients resume on another
// replica, not receive progress that repeats an old revision), and
// GetTarget is Unavailable. When etcd is reachable again it serves again
// by itself.
func TestClusterPartitionedReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs probed")
	}
	t.Parallel()
	const ttl = 2 * time.Second
	etcd := etcdtest.Start(t)
	proxy := tcpproxy.Start(t, etcd.Endpoints()[0])
	bin := buildProbed(t)
	replica := func(id, endpoint string) *crashProcess {
		p := &crashProcess{t: t, bin: bin, args: []string{"--addr", refused.Reserve(t).Addr(), "--store", "etcd",
			"--etcd-endpoints", endpoint, "--replica-id", id, "--lease-ttl", ttl.String(), "--settle", "1s",
			"--metrics-addr", "", "--registrations-per-second=0"}}
		t.Cleanup(func() { p.kill() })
		if _, err := p.start(); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		return p
	}
	cut := replica("r1", proxy.Addr())
	other := replica("r2", etcd.Endpoints()[0])

	ctx := t.Context()
	c, err := client.Dial(ctx, other.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create(ctx, probedtest.NewBackend(t, true).Readiness("web")); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(cut.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api, health := probev1.NewProbeServiceClient(conn), healthpb.NewHealthClient(conn)
	get := func() error {
		gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := api.GetTarget(gctx, &probev1.GetTargetRequest{Name: "web"})
		return err
	}
	serving := func() healthpb.HealthCheckResponse_ServingStatus {
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := health.Check(hctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatalf("health check of %s: %v", cut.addr(), err)
		}
		return resp.Status
	}
	poll.UntilMet(t, "r1 to see web", 20*time.Second, func() string {
		if err := get(); err != nil {
			return fmt.Sprintf("r1 does not see web after 20s: %v", err)
		}
		return ""
	})
	if st := serving(); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("before the partition r1's health is %v", st)
	}
	stream, err := api.Watch(ctx, &probev1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("the watch's snapshot: %v", err)
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()

	proxy.Pause()
	cutAt := time.Now()
	bound := ttl + clusterSlack
	poll.Every(50*time.Millisecond).UntilMet(t, fmt.Sprintf("r1 cut off from etcd NOT_SERVING (bound: TTL %v + %v)", ttl, clusterSlack), bound, func() string {
		if st := serving(); st != healthpb.HealthCheckResponse_NOT_SERVING {
			return st.String() + "\n" + cut.log()
		}
		return ""
	})
	t.Logf("r1 NOT_SERVING %v after the partition", time.Since(cutAt).Round(time.Millisecond))
	select {
	case err := <-ended:
		if status.Code(err) != codes.Unavailable {
			t.Errorf("r1's watch ended with %v, want Unavailable", err)
		}
	case <-time.After(time.Until(cutAt.Add(bound))):
		t.Errorf("r1's watch still open %v after the partition", time.Since(cutAt))
	}
	if err := get(); status.Code(err) != codes.Unavailable {
		t.Errorf("GetTarget on r1 cut off from etcd = %v, want Unavailable", err)
	}

	proxy.Resume()
	healed := time.Now()
	poll.Every(100*time.Millisecond).UntilMet(t, "r1 serving again once etcd is reachable", 30*time.Second, func() string {
		if st, err := serving(), get(); st != healthpb.HealthCheckResponse_SERVING || err != nil {
			return fmt.Sprintf("health %v, get %v\n%s", st, err, cut.log())
		}
		return ""
	})
	t.Logf("r1 serving again %v after the partition healed", time.Since(healed).Round(time.Millisecond))
}
