package xds_test

import (
	"context"
	"strconv"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/refused"
	"github.com/probed/probed/xds"
)

func nodeOf(id string) *corev3.Node        { return &corev3.Node{Id: id} }
func statusOf(msg string) *statuspb.Status { return &statuspb.Status{Code: 3, Message: msg} }
func anyOf(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// wantListener is the API listener a gRPC client must get for service,
// every field written out.
func wantListener(t *testing.T, service string) *listenerv3.Listener {
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: service,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: service,
			VirtualHosts: []*routev3.VirtualHost{{
				Name:    service,
				Domains: []string{"*"},
				Routes: []*routev3.Route{{
					Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: ""}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: service}}},
				}},
			}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, &routerv3.Router{})},
		}},
	}
	return &listenerv3.Listener{Name: service, ApiListener: &listenerv3.ApiListener{ApiListener: anyOf(t, hcm)}}
}

// wantCluster is the cluster gRPC and Envoy must get for service.
func wantCluster(t *testing.T, service string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 service,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			ResourceApiVersion:    corev3.ApiVersion_V3,
		}},
		LbPolicy: clusterv3.Cluster_ROUND_ROBIN,
		CommonLbConfig: &clusterv3.Cluster_CommonLbConfig{
			HealthyPanicThreshold: &typev3.Percent{Value: 0},
			UpdateMergeWindow:     durationpb.New(0),
		},
		TypedExtensionProtocolOptions: map[string]*anypb.Any{
			"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": anyOf(t, &upstreamhttpv3.HttpProtocolOptions{
				UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{
					UseDownstreamProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
						HttpProtocolOptions:  &corev3.Http1ProtocolOptions{},
						Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
					},
				},
			}),
		},
	}
}

// hostPort is one expected endpoint.
type hostPort struct {
	host   string
	port   int32
	health corev3.HealthStatus
}

// wantAssignment is the assignment of service with these endpoints, in
// this order.
func wantAssignment(service string, eps ...hostPort) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: service}
	if len(eps) == 0 {
		return cla
	}
	var lbs []*endpointv3.LbEndpoint
	for _, e := range eps {
		lbs = append(lbs, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Protocol: corev3.SocketAddress_TCP, Address: e.host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(e.port)},
				}}},
			}},
			HealthStatus:        e.health,
			LoadBalancingWeight: wrapperspb.UInt32(1),
		})
	}
	cla.Endpoints = []*endpointv3.LocalityLbEndpoints{{
		Locality:            &corev3.Locality{},
		LoadBalancingWeight: wrapperspb.UInt32(1),
		LbEndpoints:         lbs,
	}}
	return cla
}

// checkResources compares the resources of r with want, in order.
func checkResources(t *testing.T, r *discovery.DiscoveryResponse, typ string, want ...proto.Message) {
	t.Helper()
	if r.GetTypeUrl() != typ {
		t.Fatalf("response type %q, want %q", r.GetTypeUrl(), typ)
	}
	var got []proto.Message
	for _, a := range r.GetResources() {
		if a.GetTypeUrl() != typ {
			t.Errorf("resource type %q, want %q", a.GetTypeUrl(), typ)
		}
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatalf("unmarshal %s: %v", a.GetTypeUrl(), err)
		}
		got = append(got, m)
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
}

func versionOf(t *testing.T, r *discovery.DiscoveryResponse) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(r.GetVersionInfo(), 10, 64)
	if err != nil {
		t.Fatalf("version %q is not a revision: %v", r.GetVersionInfo(), err)
	}
	return v
}

// TestGRPCClientGetsListenerClusterAndAssignment walks the requests a
// gRPC client dialing xds:///web.team-a makes, checking every field of
// every resource, the versions, and that an ACK is not answered.
func TestGRPCClientGetsListenerClusterAndAssignment(t *testing.T) {
	p := startXDS(t, setup{})
	port := probedtest.Accepting(t)
	down := refused.Port(t)
	web := service("web")
	p.create(t, tcpTarget("team-a/web-0", "127.0.0.1", port, web))
	// The serving port: probed on one port, traffic to another.
	p.create(t, tcpTarget("team-a/web-1", "127.0.0.1", port, map[string]string{xds.LabelService: "web", xds.LabelServingPort: "9001"}))
	p.create(t, tcpTarget("team-a/web-2", "127.0.0.1", down, web)) // never ready: left out
	p.create(t, tcpTarget("team-a/web-3", "localhost", port, web)) // ready, but not an IP
	p.create(t, tcpTarget("team-b/web-0", "127.0.0.1", port, web)) // another namespace: web.team-b
	p.create(t, tcpTarget("team-a/other", "127.0.0.1", port, nil)) // no service
	p.create(t, &target.Spec{Name: "team-a/web-4", Labels: web})   // no readiness probe
	p.waitReady(t, true, "team-a/web-0", "team-a/web-1", "team-a/web-3", "team-b/web-0")

	c := dialADS(t, p.addr, "anyone")
	const name = "web.team-a"
	c.request(xds.ListenerType, []string{name}, "", "", "")
	lds := c.next()
	checkResources(t, lds, xds.ListenerType, wantListener(t, name))
	v1 := versionOf(t, lds)
	if rev := p.eng.Revision(); v1 == 0 || v1 > rev {
		t.Errorf("listener version %d, want a revision of the event log, at most %d", v1, rev)
	}
	c.ack(lds, name)

	c.request(xds.ClusterType, []string{name}, "", "", "")
	cds := c.next()
	checkResources(t, cds, xds.ClusterType, wantCluster(t, name))
	c.ack(cds, name)

	c.request(xds.EndpointType, []string{name}, "", "", "")
	eds := c.next()
	checkResources(t, eds, xds.EndpointType, wantAssignment(name, // sorted by address: 9001 is below ephemeral ports
		hostPort{"127.0.0.1", 9001, corev3.HealthStatus_HEALTHY},
		hostPort{"127.0.0.1", port, corev3.HealthStatus_HEALTHY}))
	c.ack(eds, name)
	c.quiet()

	st := p.srv.Stats()
	if want := map[string]int{xds.ReasonHostNotAnIP: 1, xds.ReasonNoReadiness: 1}; !cmp.Equal(st.Excluded, want) {
		t.Errorf("Stats().Excluded = %v, want %v", st.Excluded, want)
	}
	if st.Services != 2 || st.ACKs != 3 || st.NACKs != 0 {
		t.Errorf("Stats() = %+v, want 2 services, 3 ACKs, no NACK", st)
	}
}

// TestFlipsArePushed: readiness transitions change the assignment, each
// at a higher version, and only the endpoints' type is sent.
func TestFlipsArePushed(t *testing.T) {
	p := startXDS(t, setup{})
	b := probedtest.NewBackend(t, true)
	other := probedtest.Accepting(t)
	p.create(t, httpTarget("ns/a", b.Port(), service("svc")))
	p.create(t, tcpTarget("ns/b", "127.0.0.1", other, service("svc")))
	p.waitReady(t, true, "ns/a", "ns/b")

	c := dialADS(t, p.addr, "anyone")
	c.request(xds.EndpointType, []string{"svc.ns"}, "", "", "")
	both := wantAssignment("svc.ns",
		hostPort{"127.0.0.1", min(b.Port(), other), corev3.HealthStatus_HEALTHY},
		hostPort{"127.0.0.1", max(b.Port(), other), corev3.HealthStatus_HEALTHY})
	r := c.next()
	checkResources(t, r, xds.EndpointType, both)
	last := versionOf(t, r)
	c.ack(r, "svc.ns")

	for i := range 3 {
		b.SetHealthy(false)
		r = c.next()
		checkResources(t, r, xds.EndpointType, wantAssignment("svc.ns", hostPort{"127.0.0.1", other, corev3.HealthStatus_HEALTHY}))
		if v := versionOf(t, r); v <= last {
			t.Fatalf("flip %d: version %d after %d", i, v, last)
		} else {
			last = v
		}
		c.ack(r, "svc.ns")
		b.SetHealthy(true)
		r = c.next()
		checkResources(t, r, xds.EndpointType, both)
		if v := versionOf(t, r); v <= last {
			t.Fatalf("flip %d back: version %d after %d", i, v, last)
		} else {
			last = v
		}
		c.ack(r, "svc.ns")
	}
}

// TestEnvoyWildcardClustersAndNamedEndpoints: Envoy asks for every
// cluster (an empty list, then "*"), then for the endpoints of each by
// name; a new service and a vanished one change the clusters.
func TestEnvoyWildcardClustersAndNamedEndpoints(t *testing.T) {
	p := startXDS(t, setup{})
	port := probedtest.Accepting(t)
	p.create(t, tcpTarget("team-a/web-0", "127.0.0.1", port, service("web")))
	p.create(t, tcpTarget("solo", "127.0.0.1", port, service("solo"))) // no namespace: the service "solo"
	p.waitReady(t, true, "team-a/web-0", "solo")

	c := dialADS(t, p.addr, "envoy")
	c.request(xds.ClusterType, nil, "", "", "")
	r := c.next()
	checkResources(t, r, xds.ClusterType, wantCluster(t, "solo"), wantCluster(t, "web.team-a"))
	c.ack(r)
	c.request(xds.EndpointType, []string{"solo", "web.team-a"}, "", "", "")
	e := c.next()
	checkResources(t, e, xds.EndpointType,
		wantAssignment("solo", hostPort{"127.0.0.1", port, corev3.HealthStatus_HEALTHY}),
		wantAssignment("web.team-a", hostPort{"127.0.0.1", port, corev3.HealthStatus_HEALTHY}))
	c.ack(e, "solo", "web.team-a")

	// A new service: every cluster again (State of the World).
	p.create(t, tcpTarget("team-b/api-0", "127.0.0.1", port, service("api")))
	r = c.next()
	checkResources(t, r, xds.ClusterType, wantCluster(t, "api.team-b"), wantCluster(t, "solo"), wantCluster(t, "web.team-a"))
	c.ack(r)

	// The last target of a service deleted: its cluster goes.
	if _, err := p.eng.Delete(context.Background(), "solo", engine.WithGracePeriod(0)); err != nil {
		t.Fatal(err)
	}
	r = c.next()
	for r.GetTypeUrl() == xds.EndpointType { // the assignment may change first
		c.ack(r, "solo", "web.team-a")
		r = c.next()
	}
	checkResources(t, r, xds.ClusterType, wantCluster(t, "api.team-b"), wantCluster(t, "web.team-a"))
}

// TestNACKIsNotAnsweredWithTheSame: a rejected response is counted and
// logged, and the same content is not sent again.
func TestNACKIsNotAnsweredWithTheSame(t *testing.T) {
	p := startXDS(t, setup{})
	port := probedtest.Accepting(t)
	p.create(t, tcpTarget("ns/a", "127.0.0.1", port, service("svc")))
	p.waitReady(t, true, "ns/a")
	c := dialADS(t, p.addr, "anyone")
	c.request(xds.EndpointType, []string{"svc.ns"}, "", "", "")
	r := c.next()
	c.request(xds.EndpointType, []string{"svc.ns"}, "", r.GetNonce(), "rejected for the test")
	c.quiet()
	if st := p.srv.Stats(); st.NACKs != 1 {
		t.Errorf("NACKs = %d, want 1", st.NACKs)
	}
}

// TestDuplicateAddressesAreOneEndpoint: two targets at one address are
// one endpoint, healthy when either is ready (a bad duplicate would make
// gRPC reject the whole assignment).
func TestDuplicateAddressesAreOneEndpoint(t *testing.T) {
	p := startXDS(t, setup{opts: xds.Options{SendUnready: true}})
	b := probedtest.NewBackend(t, true)
	// Three targets send traffic to the backend's port: two ready, one
	// probing a path that fails.
	p.create(t, httpTarget("ns/ready", b.Port(), service("svc")))
	p.create(t, httpTarget("ns/twin", b.Port(), service("svc")))
	bad := httpTarget("ns/unready", b.Port(), service("svc"))
	bad.ReadinessProbe.Handler.HTTPGet.Path = "/nothing"
	p.create(t, bad)
	p.waitReady(t, true, "ns/ready", "ns/twin")
	c := dialADS(t, p.addr, "anyone")
	c.request(xds.EndpointType, []string{"svc.ns"}, "", "", "")
	checkResources(t, c.next(), xds.EndpointType, wantAssignment("svc.ns", hostPort{"127.0.0.1", b.Port(), corev3.HealthStatus_HEALTHY}))
}
