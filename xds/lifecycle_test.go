package xds_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/jonboulle/clockwork"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/server/auth"
	"github.com/probed/probed/store/bolt"
	"github.com/probed/probed/xds"
)

// TestTerminatingLeavesAtOnce: a deleted target leaves the assignment
// when its deletion starts, not when its preStop sleep ends.
func TestTerminatingLeavesAtOnce(t *testing.T) {
	p := startXDS(t, setup{})
	port := probedtest.Accepting(t)
	other := probedtest.Accepting(t)
	draining := tcpTarget("ns/old", "127.0.0.1", port, service("svc"))
	draining.Lifecycle = &target.Lifecycle{PreStop: &target.Handler{Sleep: &target.SleepAction{Seconds: 600}}}
	draining.TerminationGracePeriodSeconds = new(int64(700))
	p.create(t, draining)
	p.create(t, tcpTarget("ns/new", "127.0.0.1", other, service("svc")))
	p.waitReady(t, true, "ns/old", "ns/new")
	c := dialADS(t, p.addr, "anyone")
	c.request(xds.EndpointType, []string{"svc.ns"}, "", "", "")
	r := c.next()
	if n := len(r.GetResources()); n != 1 {
		t.Fatalf("%d assignments, want 1", n)
	}
	c.ack(r, "svc.ns")
	if _, err := p.eng.Delete(context.Background(), "ns/old"); err != nil {
		t.Fatal(err)
	}
	checkResources(t, c.next(), xds.EndpointType, wantAssignment("svc.ns", hostPort{"127.0.0.1", other, corev3.HealthStatus_HEALTHY}))
	if tg, err := p.eng.Get(context.Background(), "ns/old"); err != nil || tg.Status.Phase != engine.Terminating {
		t.Errorf("ns/old: %v, %v; want still terminating (in its preStop)", tg, err)
	}
}

// TestSendUnready: with the option, not-ready targets are UNHEALTHY and
// terminating ones DRAINING, never unset.
func TestSendUnready(t *testing.T) {
	p := startXDS(t, setup{opts: xds.Options{SendUnready: true}})
	b := probedtest.NewBackend(t, false)
	port := probedtest.Accepting(t)
	draining := tcpTarget("ns/old", "127.0.0.1", port, service("svc"))
	draining.Lifecycle = &target.Lifecycle{PreStop: &target.Handler{Sleep: &target.SleepAction{Seconds: 600}}}
	draining.TerminationGracePeriodSeconds = new(int64(700))
	p.create(t, draining)
	p.create(t, httpTarget("ns/down", b.Port(), service("svc")))
	p.waitReady(t, true, "ns/old")
	c := dialADS(t, p.addr, "anyone")
	c.request(xds.EndpointType, []string{"svc.ns"}, "", "", "")
	r := c.next()
	c.ack(r, "svc.ns")
	if _, err := p.eng.Delete(context.Background(), "ns/old"); err != nil {
		t.Fatal(err)
	}
	lo, hi := hostPort{"127.0.0.1", port, corev3.HealthStatus_DRAINING}, hostPort{"127.0.0.1", b.Port(), corev3.HealthStatus_UNHEALTHY}
	if lo.port > hi.port {
		lo, hi = hi, lo
	}
	checkResources(t, c.next(), xds.EndpointType, wantAssignment("svc.ns", lo, hi))
}

// TestEachIdentitySeesWhatItMayRead: two identities subscribed to one
// service see only the endpoints of the targets they may read; one that
// may read none sees no service; a policy change is pushed.
func TestEachIdentitySeesWhatItMayRead(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "policy.yaml")
	write := func(rules string) {
		if err := os.WriteFile(file, []byte(rules), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("rules:\n- {identities: [alice], names: [ns/a], verbs: [read]}\n- {identities: [bob], names: [ns/], verbs: [read]}\n")
	policy, err := auth.LoadPolicy(file)
	if err != nil {
		t.Fatal(err)
	}
	p := startXDS(t, setup{opts: xds.Options{Authorizer: policy}})
	pa, pb := probedtest.Accepting(t), probedtest.Accepting(t)
	p.create(t, tcpTarget("ns/a", "127.0.0.1", pa, service("svc")))
	p.create(t, tcpTarget("ns/b", "127.0.0.1", pb, service("svc")))
	p.waitReady(t, true, "ns/a", "ns/b")

	alice, bob, eve := dialADS(t, p.addr, "alice"), dialADS(t, p.addr, "bob"), dialADS(t, p.addr, "eve")
	for _, c := range []*adsClient{alice, bob, eve} {
		c.request(xds.ListenerType, []string{"svc.ns"}, "", "", "")
	}
	checkResources(t, alice.next(), xds.ListenerType, wantListener(t, "svc.ns"))
	checkResources(t, bob.next(), xds.ListenerType, wantListener(t, "svc.ns"))
	checkResources(t, eve.next(), xds.ListenerType) // none: the service does not exist for eve

	alice.request(xds.EndpointType, []string{"svc.ns"}, "", "", "")
	bob.request(xds.EndpointType, []string{"svc.ns"}, "", "", "")
	lo, hi := min(pa, pb), max(pa, pb)
	mine := alice.next()
	checkResources(t, mine, xds.EndpointType, wantAssignment("svc.ns", hostPort{"127.0.0.1", pa, corev3.HealthStatus_HEALTHY}))
	checkResources(t, bob.next(), xds.EndpointType, wantAssignment("svc.ns", hostPort{"127.0.0.1", lo, corev3.HealthStatus_HEALTHY}, hostPort{"127.0.0.1", hi, corev3.HealthStatus_HEALTHY}))

	// alice may now read ns/b too (a different size: Reload sees it).
	write("rules:\n- {identities: [alice], names: [ns/a, ns/b], verbs: [read]}\n- {identities: [bob], names: [ns/], verbs: [read]}\n")
	if changed, err := policy.Reload(); err != nil || !changed {
		t.Fatalf("reload: %v, %v", changed, err)
	}
	// Her last answer was not acknowledged: the push comes once she does.
	alice.ack(mine, "svc.ns")
	checkResources(t, alice.next(), xds.EndpointType, wantAssignment("svc.ns", hostPort{"127.0.0.1", lo, corev3.HealthStatus_HEALTHY}, hostPort{"127.0.0.1", hi, corev3.HealthStatus_HEALTHY}))
}

// TestAReconnectIsNotAnsweredFromBefore: a client that saw a revision
// this server has not reached (a replica a little behind) waits for it,
// up to CatchUpWait; one that saw an older revision is answered at once.
func TestAReconnectIsNotAnsweredFromBefore(t *testing.T) {
	p := startXDS(t, setup{opts: xds.Options{CatchUpWait: time.Second}})
	port := probedtest.Accepting(t)
	p.create(t, tcpTarget("ns/a", "127.0.0.1", port, service("svc")))
	p.waitReady(t, true, "ns/a")
	rev := p.eng.Revision()

	ahead := dialADS(t, p.addr, "anyone")
	ahead.request(xds.ClusterType, []string{"svc.ns"}, strconv.FormatUint(rev+1000, 10), "", "")
	ahead.quiet() // 300 ms of a 1 s wait
	r := ahead.next()
	checkResources(t, r, xds.ClusterType, wantCluster(t, "svc.ns"))

	behind := dialADS(t, p.addr, "anyone")
	behind.request(xds.ClusterType, []string{"svc.ns"}, strconv.FormatUint(rev, 10), "", "")
	select {
	case r := <-behind.resps:
		if v := versionOf(t, r); v < rev {
			t.Errorf("version %d after the client saw %d", v, rev)
		}
	case <-time.After(500 * time.Millisecond): // well under the 1 s CatchUpWait
		t.Fatal("a client that saw an older revision was not answered at once")
	}
}

// TestARestartServesPersistedReadiness: a probed restarted over its
// store answers at once with the readiness it persisted (before any
// probe runs: its clock is stopped), at a version not below what the
// client saw, and the same content.
func TestARestartServesPersistedReadiness(t *testing.T) {
	dir := t.TempDir()
	st, err := bolt.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := startXDS(t, setup{store: st})
	port := probedtest.Accepting(t)
	p.create(t, tcpTarget("ns/a", "127.0.0.1", port, service("svc")))
	p.waitReady(t, true, "ns/a")
	c := dialADS(t, p.addr, "anyone")
	c.request(xds.EndpointType, []string{"svc.ns"}, "", "", "")
	before := c.next()
	want := wantAssignment("svc.ns", hostPort{"127.0.0.1", port, corev3.HealthStatus_HEALTHY})
	checkResources(t, before, xds.EndpointType, want)
	p.stop()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = bolt.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p = startXDS(t, setup{store: st, clock: clockwork.NewFakeClock()})
	c = dialADS(t, p.addr, "anyone")
	c.request(xds.EndpointType, []string{"svc.ns"}, before.GetVersionInfo(), "", "")
	after := c.next()
	checkResources(t, after, xds.EndpointType, want)
	if versionOf(t, after) < versionOf(t, before) {
		t.Errorf("version %s after a restart, %s before", after.GetVersionInfo(), before.GetVersionInfo())
	}
}

// TestDeltaStream: an incremental client gets the assignment with its
// hash as version, changes as they come, nothing when it reconnects
// with what it has, and the removal of a vanished service.
func TestDeltaStream(t *testing.T) {
	p := startXDS(t, setup{})
	b := probedtest.NewBackend(t, true)
	p.create(t, httpTarget("ns/a", b.Port(), service("svc")))
	p.waitReady(t, true, "ns/a")

	open := func() (grpc.BidiStreamingClient[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse], func()) {
		conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "identity", "envoy"))
		s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s, func() { cancel(); _ = conn.Close() }
	}
	s, closeStream := open()
	defer closeStream()
	if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: nodeOf("envoy"), TypeUrl: xds.EndpointType, ResourceNamesSubscribe: []string{"svc.ns"}}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetResources()) != 1 || r.GetResources()[0].GetName() != "svc.ns" || r.GetResources()[0].GetVersion() == "" {
		t.Fatalf("first delta response %v", r)
	}
	have := r.GetResources()[0].GetVersion()
	if err := s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: xds.EndpointType, ResponseNonce: r.GetNonce()}); err != nil {
		t.Fatal(err)
	}
	b.SetHealthy(false)
	r, err = s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetResources()) != 1 || r.GetResources()[0].GetVersion() == have {
		t.Fatalf("delta response after a flip %v", r)
	}
	have = r.GetResources()[0].GetVersion()
	closeStream()

	// Reconnect with what it has: nothing to send until the service goes.
	s, closeStream = open()
	defer closeStream()
	if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: nodeOf("envoy"), TypeUrl: xds.EndpointType,
		ResourceNamesSubscribe: []string{"svc.ns"}, InitialResourceVersions: map[string]string{"svc.ns": have}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.eng.Delete(context.Background(), "ns/a", engine.WithGracePeriod(0)); err != nil {
		t.Fatal(err)
	}
	r, err = s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetResources()) != 0 || len(r.GetRemovedResources()) != 1 || r.GetRemovedResources()[0] != "svc.ns" {
		t.Fatalf("delta response after the service went: %v (want only its removal: the reconnect had nothing new)", r)
	}
}
