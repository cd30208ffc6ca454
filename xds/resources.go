package xds

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The type URLs of the resources probed serves.
const (
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
)

// TypeName is the short name of a type URL: listener, cluster, endpoint
// (other for any other).
func TypeName(typeURL string) string {
	switch typeURL {
	case ListenerType:
		return "listener"
	case ClusterType:
		return "cluster"
	case EndpointType:
		return "endpoint"
	}
	return "other"
}

// RouterFilter is the name of the terminal HTTP filter of the listeners.
const RouterFilter = "envoy.filters.http.router"

// resource is one marshalled resource and its content hash (the
// resource's version: equal hashes, equal content).
type resource struct {
	name string
	any  *anypb.Any
	hash string
}

var deterministic = proto.MarshalOptions{Deterministic: true}

// marshal wraps m in an Any, deterministically, with its hash.
func marshal(name string, m proto.Message) resource {
	b, err := deterministic.Marshal(m)
	if err != nil {
		// The messages are built here from valid values: a failure is a
		// bug, not input.
		panic(fmt.Sprintf("xds: marshal %s %q: %v", m.ProtoReflect().Descriptor().FullName(), name, err))
	}
	sum := sha256.Sum256(b)
	return resource{
		name: name,
		any:  &anypb.Any{TypeUrl: "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName()), Value: b},
		hash: hex.EncodeToString(sum[:16]),
	}
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(fmt.Sprintf("xds: %v", err))
	}
	return a
}

// listener is the API listener of a service, what a gRPC client dialing
// xds:///SERVICE asks for: an HttpConnectionManager whose inline route
// configuration sends every RPC to the cluster of the same name, with the
// router filter (the only, terminal, filter) last.
func listener(service string) *listenerv3.Listener {
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: service,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: service,
			VirtualHosts: []*routev3.VirtualHost{{
				Name:    service,
				Domains: []string{"*"},
				Routes: []*routev3.Route{{
					Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: ""}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{
						ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: service},
					}},
				}},
			}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       RouterFilter,
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})},
		}},
	}
	return &listenerv3.Listener{
		Name:        service,
		ApiListener: &listenerv3.ApiListener{ApiListener: mustAny(hcm)},
	}
}

// cluster is the cluster of a service: type EDS, its endpoints over the
// same ADS stream, round robin. For Envoy it carries what a cluster fed
// by an external prober needs: no active health checks (with them Envoy
// starts new hosts unhealthy whatever EDS says), health-only updates
// applied at once (update_merge_window 0s; Envoy's default merges them
// for up to 1 s), panic routing off (healthy_panic_threshold 0%: probed
// sends only healthy endpoints unless told otherwise), and the upstream
// protocol of the downstream (HTTP/2 for gRPC). gRPC clients ignore the
// last three.
func cluster(service string) *clusterv3.Cluster {
	protocol := &upstreamhttpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{
			UseDownstreamProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
				HttpProtocolOptions:  &corev3.Http1ProtocolOptions{},
				Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
			},
		},
	}
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
			"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": mustAny(protocol),
		},
	}
}

// endpoint is one address of a service's assignment.
type endpoint struct {
	addr   netip.AddrPort
	health corev3.HealthStatus
}

// assignment is the ClusterLoadAssignment of a service: one locality
// (empty, weight 1: gRPC ignores a locality without a weight) holding
// the endpoints, sorted by address, each with its health and weight 1;
// none at all when the service has no endpoint to send. staleAfter, when
// positive, is the policy's endpoint_stale_after.
func assignment(service string, endpoints []endpoint, staleAfter time.Duration) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: service}
	if staleAfter > 0 {
		cla.Policy = &endpointv3.ClusterLoadAssignment_Policy{EndpointStaleAfter: durationpb.New(staleAfter)}
	}
	if len(endpoints) == 0 {
		return cla
	}
	slices.SortFunc(endpoints, func(a, b endpoint) int { return a.addr.Compare(b.addr) })
	lbs := make([]*endpointv3.LbEndpoint, len(endpoints))
	for i, e := range endpoints {
		lbs[i] = &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Protocol:      corev3.SocketAddress_TCP,
					Address:       e.addr.Addr().String(),
					PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(e.addr.Port())},
				}}},
			}},
			HealthStatus:        e.health,
			LoadBalancingWeight: wrapperspb.UInt32(1),
		}
	}
	cla.Endpoints = []*endpointv3.LocalityLbEndpoints{{
		Locality:            &corev3.Locality{},
		LoadBalancingWeight: wrapperspb.UInt32(1),
		LbEndpoints:         lbs,
	}}
	return cla
}
