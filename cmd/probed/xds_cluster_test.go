package main

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/refused"
	"github.com/probed/probed/internal/tcpproxy"
	"github.com/probed/probed/xds"
)

// xdsCluster is probed replicas over a real etcd, each serving xDS, and a
// failover TCP proxy in front of their xDS listeners, standing in for the
// Service the README puts there: a connection goes to the first replica
// (in the order they started) that accepts it.
type xdsCluster struct {
	*clusterRun
	xdsAddrs map[string]string // replica id -> its --xds-addr
	proxy    *tcpproxy.Proxy
}

// startXDSCluster starts n replicas (lease TTL clusterTTL) with
// --xds-addr and the proxy in front of them, and waits until every shard
// is owned.
func startXDSCluster(t *testing.T, n int) *xdsCluster {
	t.Helper()
	c := &xdsCluster{clusterRun: newClusterRun(t, 1, clusterTTL), xdsAddrs: map[string]string{}}
	c.extraArgs = func(id string) []string {
		addr := refused.Reserve(t).Addr()
		c.xdsAddrs[id] = addr
		return []string{"--xds-addr", addr, "--min-period", "10ms", "--min-timeout", "10ms"}
	}
	c.begin(t, n)
	var upstreams []string
	for _, r := range c.replicas {
		upstreams = append(upstreams, c.xdsAddrs[r.id])
	}
	c.proxy = tcpproxy.StartFailover(t, upstreams...)
	return c
}

// attached waits until exactly one running replica serves xDS streams,
// streams of them, and returns it.
func (c *xdsCluster) attached(t *testing.T, streams float64) *clusterReplica {
	t.Helper()
	var at *clusterReplica
	poll.UntilMet(t, "one replica serving the xDS client", 30*time.Second, func() string {
		at = nil
		counts := map[string]float64{}
		for _, r := range c.replicas {
			if !r.running() {
				continue
			}
			n := sumMetric(metricsText(t, r.metrics), "probed_xds_streams")
			counts[r.id] = n
			switch {
			case n == streams && at == nil:
				at = r
			case n != 0:
				return fmt.Sprintf("xDS streams by replica: %v", counts)
			}
		}
		if at == nil {
			return fmt.Sprintf("no replica with %v streams: %v", streams, counts)
		}
		return ""
	})
	return at
}

// nacks sums the NACKs the running replicas received.
func (c *xdsCluster) nacks(t *testing.T) float64 {
	t.Helper()
	var n float64
	for _, r := range c.replicas {
		if r.running() {
			n += labelledMetric(metricsText(t, r.metrics), "probed_xds_requests_total", `result="nack"`)
		}
	}
	return n
}

// fetchXDS asks the xDS server at addr for one resource of typ over a new
// ADS stream and returns the first response.
func fetchXDS(t *testing.T, addr, typ, name string) *discovery.DiscoveryResponse {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatalf("ADS of %s: %v", addr, err)
	}
	if err := stream.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "check"}, TypeUrl: typ, ResourceNames: []string{name}}); err != nil {
		t.Fatalf("ADS of %s: %v", addr, err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("ADS of %s: %v", addr, err)
	}
	return resp
}

// TestXDSClusterFailover drives a real grpc-go xds:/// client through a
// failover TCP proxy (a Service) in front of three probed replicas over
// a real etcd, and kills (SIGKILL) the replica its xDS stream is on:
//   - no RPC fails, before, across or after the kill;
//   - the client reconnects to another replica, rejects nothing (no
//     NACK, at the client or at any replica), is never told a resource
//     does not exist, and no resource's version goes back;
//   - the next flip is followed, through the new replica;
//   - versions are revisions of the event log (etcd's): the client's
//     assignment is at a revision from the event that changed it last to
//     etcd's current one, and two replicas at rest answer the same
//     version with the same content.
func TestXDSClusterFailover(t *testing.T) {
	c := startXDSCluster(t, 3)
	ctx := t.Context()
	b := startGRPCBackends(t, 3)
	for i := range 3 {
		if _, err := c.client.Create(ctx, b.target("ns", "svc", i, 50*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	x := startXDSClient(t, c.proxy.Addr(), "xds:///svc.ns", 200)
	start := time.Now()
	x.waitServed(t, start, "b0", "b1", "b2")
	x.followFlip(t, b, 0, "b1", "b2")
	attached := c.attached(t, 1)

	killed := attached.kill()
	t.Logf("killed %s, the replica the xDS client was on, at %v", attached.id, killed.Format(time.StampMilli))
	next := c.attached(t, 1)
	x.waitServed(t, time.Now(), "b0", "b1", "b2")
	x.followFlip(t, b, 1, "b0", "b2")

	if f := x.failed(start); len(f) > 0 {
		t.Errorf("%d RPCs failed, first %+v (kill at %v)", len(f), f[0], killed)
	}
	if n := c.nacks(t); n != 0 {
		t.Errorf("%v NACKs at the running replicas", n)
	}
	x.stop(t)
	versions := x.checkXDSStates(t)

	// The assignment's version is a revision of the event log, etcd's:
	// at least that of the event that changed it last (ns/svc-1 turning
	// ready again), at most etcd's own (the replicas' position in it
	// also moves with the writes of the cluster itself: shards changing
	// hands after the kill).
	flipped, err := c.client.Get(ctx, "ns/svc-1")
	if err != nil {
		t.Fatal(err)
	}
	// The event log's revision of etcd revision R is R<<10 | i, at most
	// R<<10 | 1023 (store/etcd).
	if v, top := versions["ClusterLoadAssignment svc.ns"], uint64(c.revision(t))<<10|1023; v < flipped.GetStatus().GetRevision() || v > top {
		t.Errorf("the client's assignment is at version %d; want a revision from ns/svc-1's last event's (%d) to etcd's (%d)",
			v, flipped.GetStatus().GetRevision(), top)
	}
	// Every replica answers the same assignment at the same version.
	var other *clusterReplica
	for _, r := range c.replicas {
		if r.running() && r != next {
			other = r
		}
	}
	poll.UntilMet(t, "both replicas' assignments equal", 30*time.Second, func() string {
		a := fetchXDS(t, c.xdsAddrs[next.id], xds.EndpointType, "svc.ns")
		o := fetchXDS(t, c.xdsAddrs[other.id], xds.EndpointType, "svc.ns")
		if a.GetVersionInfo() != o.GetVersionInfo() || len(a.GetResources()) != 1 || !proto.Equal(a.GetResources()[0], o.GetResources()[0]) {
			return fmt.Sprintf("%s: version %s, %d resources; %s: version %s", next.id, a.GetVersionInfo(), len(a.GetResources()), other.id, o.GetVersionInfo())
		}
		if v, _ := strconv.ParseUint(a.GetVersionInfo(), 10, 64); v < versions["ClusterLoadAssignment svc.ns"] {
			return fmt.Sprintf("the replicas answer version %d, older than the client's %d", v, versions["ClusterLoadAssignment svc.ns"])
		}
		return ""
	})
	t.Logf("the client moved from %s to %s; versions %v", attached.id, next.id, versions)
}
