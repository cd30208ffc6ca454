package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	// The types the profile's typed configs name, for protojson.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/probed/probed/xds"
)

// codeBlock returns the fenced code block (of language lang) between the
// README's markers.
func codeBlock(t *testing.T, root, marker, lang string) string {
	t.Helper()
	b := strings.TrimSpace(readmeBlock(t, root, marker))
	b, ok := strings.CutPrefix(b, "```"+lang+"\n")
	if !ok {
		t.Fatalf("README block %s is not a %s code block", marker, lang)
	}
	return strings.TrimSuffix(b, "```")
}

// testXDSClient runs the README's xDS session (a target of the service
// web.shop probing make run's own port) in the sandbox, then its gRPC
// client: main.go in a new module, and the commands that set it up and
// run it, each command with the exports of the ones before it.
//
// The setup resolves grpc-go v1.85.0's own minimum versions of its
// dependencies, from the module cache or else from the Go module proxy:
// the one step of the README test that may use the network. Before `go
// run`, the module's requirements are raised to probed's versions (same
// grpc-go), so that its build shares the build cache with probed's: the
// envoy types alone take minutes to compile a second time on 2 cores.
func testXDSClient(t *testing.T, e *readmeEnv) {
	e.runSession(t, "xds-session", 3)
	app := t.TempDir()
	if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(codeBlock(t, e.root, "xds-client-program", "go")), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	steps := readmeSession(t, e.root, "xds-client-run")
	if len(steps) != 3 {
		t.Fatalf("README's xDS client has %d commands, want 3", len(steps))
	}
	var exports []string
	for i, s := range steps {
		line := e.toTest(s.cmd)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute) // a cold build of grpc-go's xDS on a loaded machine
		cmd := exec.CommandContext(ctx, "sh", "-c", strings.Join(append(exports, line), "\n"))
		cmd.Dir = app
		cmd.Env = env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("command %d: %v\n%s\n%s%s", i, err, s.cmd, stdout.String(), stderr.String())
		}
		if i == 0 {
			alignRequirements(t, e.root, app, env)
		}
		if strings.HasPrefix(s.cmd, "export ") {
			exports = append(exports, line)
		}
		if len(s.output) == 0 {
			continue // go's own progress lines on stderr
		}
		if got := lines(e.toREADME(stdout.String())); !slices.Equal(got, s.output) {
			t.Errorf("command %d, %s: printed %q, want the README's %q\nstderr:\n%s", i, s.cmd, got, s.output, stderr.String())
		}
	}
}

// alignRequirements sets every requirement of the module in dir that the
// module in root has too to root's version.
func alignRequirements(t *testing.T, root, dir string, env []string) {
	t.Helper()
	requires := func(dir string) map[string]string {
		t.Helper()
		cmd := exec.Command("go", "mod", "edit", "-json")
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go mod edit -json in %s: %v", dir, err)
		}
		var mod struct {
			Require []struct{ Path, Version string }
		}
		if err := json.Unmarshal(out, &mod); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range mod.Require {
			m[r.Path] = r.Version
		}
		return m
	}
	ours := requires(root)
	args := []string{"mod", "edit"}
	for path, v := range requires(dir) {
		if o, ok := ours[path]; ok && o != v {
			args = append(args, "-require="+path+"@"+o)
		}
	}
	if len(args) == 2 {
		return
	}
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}
}

// testEnvoyProfile checks the README's Envoy configuration against
// Envoy's v3 API (every field known, every constraint of the protos'
// validation rules met, typed configs included), and then does what it
// tells Envoy to do: an ADS stream to make run's xDS server, a wildcard
// CDS request, EDS for the cluster its listener routes to. The cluster
// carries what the README says (no health checks, a merge window of 0 s,
// a panic threshold of 0 %), and the assignment holds the ready endpoint
// of the xDS session: make run's own API port.
func testEnvoyProfile(t *testing.T, e *readmeEnv) {
	js, err := yaml.YAMLToJSON([]byte(codeBlock(t, e.root, "envoy-profile", "yaml")))
	if err != nil {
		t.Fatal(err)
	}
	var bs bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &bs); err != nil {
		t.Fatalf("the Envoy profile is not an Envoy v3 bootstrap: %v", err)
	}
	if err := validateEnvoy(&bs); err != nil {
		t.Fatalf("the Envoy profile: %v", err)
	}
	// The ADS server is the static cluster its grpc_services name, at make
	// run's --xds-addr.
	ads := bs.GetDynamicResources().GetAdsConfig()
	if len(ads.GetGrpcServices()) != 1 || bs.GetDynamicResources().GetCdsConfig().GetAds() == nil {
		t.Fatalf("the profile takes CDS from %v over ADS %v; want ADS from one gRPC service", bs.GetDynamicResources().GetCdsConfig(), ads)
	}
	name := ads.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName()
	var server string
	for _, c := range bs.GetStaticResources().GetClusters() {
		if c.GetName() == name {
			sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
			server = e.toTest(net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))))
		}
	}
	if server != e.xdsAddr {
		t.Fatalf("the profile's ADS cluster %q is at %q, want make run's --xds-addr (%s)", name, server, e.xdsAddr)
	}
	// The clusters its listeners route to.
	var routed []string
	for _, l := range bs.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
					continue
				}
				for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
					for _, r := range vh.GetRoutes() {
						routed = append(routed, r.GetRoute().GetCluster())
					}
				}
			}
		}
	}
	if len(routed) == 0 {
		t.Fatal("the profile's listeners route to no cluster")
	}

	conn, err := grpc.NewClient(server, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "envoy-readme", Cluster: "front"}
	ask := func(typ string, names []string, prev *discovery.DiscoveryResponse) *discovery.DiscoveryResponse {
		t.Helper()
		req := &discovery.DiscoveryRequest{Node: node, TypeUrl: typ, ResourceNames: names}
		if prev != nil { // an ACK
			req.VersionInfo, req.ResponseNonce = prev.GetVersionInfo(), prev.GetNonce()
		}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	cds := ask(xds.ClusterType, nil, nil) // wildcard, as Envoy's CDS
	clusters := map[string]*clusterv3.Cluster{}
	for _, a := range cds.GetResources() {
		var c clusterv3.Cluster
		if err := a.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		if err := validateEnvoy(&c); err != nil {
			t.Errorf("cluster %s: %v", c.GetName(), err)
		}
		clusters[c.GetName()] = &c
	}
	for _, r := range routed {
		c := clusters[r]
		switch {
		case c == nil:
			t.Errorf("the profile routes to the cluster %q; probed serves %v", r, cds.GetResources())
			continue
		case len(c.GetHealthChecks()) > 0:
			t.Errorf("cluster %s has active health checks", r)
		case c.GetCommonLbConfig().GetUpdateMergeWindow() == nil || c.GetCommonLbConfig().GetUpdateMergeWindow().AsDuration() != 0:
			t.Errorf("cluster %s: update_merge_window %v, want 0s", r, c.GetCommonLbConfig().GetUpdateMergeWindow())
		case c.GetCommonLbConfig().GetHealthyPanicThreshold() == nil || c.GetCommonLbConfig().GetHealthyPanicThreshold().GetValue() != 0:
			t.Errorf("cluster %s: healthy_panic_threshold %v, want 0", r, c.GetCommonLbConfig().GetHealthyPanicThreshold())
		case c.GetEdsClusterConfig().GetEdsConfig().GetAds() == nil:
			t.Errorf("cluster %s: EDS not over ADS: %v", r, c.GetEdsClusterConfig())
		}
	}
	eds := ask(xds.EndpointType, routed, cds)
	want := net.JoinHostPort("127.0.0.1", e.ports[readmeAPIPort])
	var got []string
	for _, a := range eds.GetResources() {
		var cla endpointv3.ClusterLoadAssignment
		if err := a.UnmarshalTo(&cla); err != nil {
			t.Fatal(err)
		}
		if err := validateEnvoy(&cla); err != nil {
			t.Errorf("assignment %s: %v", cla.GetClusterName(), err)
		}
		for _, l := range cla.GetEndpoints() {
			for _, ep := range l.GetLbEndpoints() {
				sa := ep.GetEndpoint().GetAddress().GetSocketAddress()
				got = append(got, fmt.Sprintf("%s %s", net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))), ep.GetHealthStatus()))
			}
		}
	}
	if len(got) != 1 || got[0] != want+" HEALTHY" {
		t.Errorf("the assignments of %v hold %v, want [%s HEALTHY] (the xDS session's web-0)", routed, got, want)
	}
}

// validateEnvoy runs the validation rules of Envoy's protos on m and on
// every message packed in an Any inside it (ValidateAll stops at an Any).
func validateEnvoy(m proto.Message) error {
	var errs []error
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if a, ok := m.Interface().(*anypb.Any); ok {
			inner, err := a.UnmarshalNew()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", a.GetTypeUrl(), err))
				return
			}
			if v, ok := inner.(interface{ ValidateAll() error }); ok {
				if err := v.ValidateAll(); err != nil {
					errs = append(errs, err)
				}
			}
			walk(inner.ProtoReflect())
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := range v.List().Len() {
					walk(v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message())
					return true
				})
			case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
				walk(v.Message())
			}
			return true
		})
	}
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			errs = append(errs, err)
		}
	}
	walk(m.ProtoReflect())
	return errors.Join(errs...)
}

// TestEnvoyProfileChecks: the README's Envoy profile passes the checks
// of testEnvoyProfile, and each of these mistakes in it fails them.
func TestEnvoyProfileChecks(t *testing.T) {
	t.Parallel()
	profile := codeBlock(t, moduleRoot(t), "envoy-profile", "yaml")
	check := func(yml string) error {
		js, err := yaml.YAMLToJSON([]byte(yml))
		if err != nil {
			return err
		}
		var bs bootstrapv3.Bootstrap
		if err := protojson.Unmarshal(js, &bs); err != nil {
			return err
		}
		return validateEnvoy(&bs)
	}
	if err := check(profile); err != nil {
		t.Fatalf("the README's profile: %v", err)
	}
	for _, tt := range []struct{ name, from, to string }{
		{"unknown field", "codec_type: AUTO", "codec: AUTO"},
		{"unknown enum value", "transport_api_version: V3", "transport_api_version: V4"},
		{"empty stat_prefix (inside a typed config)", "stat_prefix: web", `stat_prefix: ""`},
		{"unknown typed config", "filters.http.router.v3.Router", "filters.http.router.v3.Routers"},
		{"port out of range", "port_value: 18000", "port_value: 180000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bad := strings.Replace(profile, tt.from, tt.to, 1)
			if bad == profile {
				t.Fatalf("the profile has no %q", tt.from)
			}
			if err := check(bad); err == nil {
				t.Errorf("a profile with %q for %q passes", tt.to, tt.from)
			}
		})
	}
}
