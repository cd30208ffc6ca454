package telemetry

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// TestCallMetricsAsOtelgrpc: the series callMetrics records are those of
// otelgrpc's server handler for the same calls — scope, name, unit,
// description, buckets, and for each call its attributes (an OK call, a
// client error, a server error with its error.type, a stream) and count.
func TestCallMetricsAsOtelgrpc(t *testing.T) {
	t.Parallel()
	record := func(t *testing.T, opts func(*sdkmetric.MeterProvider) []grpc.ServerOption) metricdata.ScopeMetrics {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = mp.Shutdown(context.Background()) }()
		callAll(t, opts(mp))
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			if sm.Scope.Name == otelgrpc.ScopeName {
				return sm
			}
		}
		t.Fatalf("no metrics of scope %s", otelgrpc.ScopeName)
		return metricdata.ScopeMetrics{}
	}
	want := record(t, func(mp *sdkmetric.MeterProvider) []grpc.ServerOption {
		return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithMeterProvider(mp)))}
	})
	got := record(t, func(mp *sdkmetric.MeterProvider) []grpc.ServerOption {
		m, err := newCallMetrics(mp)
		if err != nil {
			t.Fatal(err)
		}
		return m.serverOptions()
	})
	if got.Scope != want.Scope {
		t.Errorf("scope %+v, want otelgrpc's %+v", got.Scope, want.Scope)
	}
	if g, w := describe(got), describe(want); !slices.Equal(g, w) {
		t.Errorf("series:\n%s\nwant otelgrpc's:\n%s", strings.Join(g, "\n"), strings.Join(w, "\n"))
	}
}

// describe lists the instruments of sm and, for each histogram, its
// buckets and the attributes and count of each series.
func describe(sm metricdata.ScopeMetrics) []string {
	var out []string
	for _, m := range sm.Metrics {
		out = append(out, fmt.Sprintf("%s [%s] %q", m.Name, m.Unit, m.Description))
		h, ok := m.Data.(metricdata.Histogram[float64])
		if !ok {
			out = append(out, fmt.Sprintf("  %T", m.Data))
			continue
		}
		for _, dp := range h.DataPoints {
			out = append(out, fmt.Sprintf("  %s: %d calls, buckets %v", dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Count, dp.Bounds))
		}
	}
	slices.Sort(out)
	return out
}

// callAll serves the health service and a failing method with opts and
// calls them: Check of the server (OK), Check of an unknown service
// (NOT_FOUND), Fail (INTERNAL), a Watch stream (CANCELLED).
func callAll(t *testing.T, opts []grpc.ServerOption) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Stop waits for the handlers: the Watch is recorded when its handler returns.
	g := grpc.NewServer(append(opts, grpc.WaitForHandlers(true))...)
	healthpb.RegisterHealthServer(g, health.NewServer())
	g.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Failing",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Fail", Handler: func(srv any, ctx context.Context, dec func(any) error, intercept grpc.UnaryServerInterceptor) (any, error) {
			req := new(emptypb.Empty)
			if err := dec(req); err != nil {
				return nil, err
			}
			fail := func(context.Context, any) (any, error) { return nil, status.Error(codes.Internal, "failed") }
			if intercept == nil {
				return fail(ctx, req)
			}
			return intercept(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Failing/Fail"}, fail)
		}}},
	}, struct{}{})
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	defer func() {
		g.Stop()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := t.Context()
	c := healthpb.NewHealthClient(conn)
	for range 2 {
		if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: "none"}); status.Code(err) != codes.NotFound {
		t.Fatalf("Check(none) = %v, want NotFound", err)
	}
	if err := conn.Invoke(ctx, "/test.Failing/Fail", &emptypb.Empty{}, &emptypb.Empty{}); status.Code(err) != codes.Internal {
		t.Fatalf("Fail = %v, want Internal", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	w, err := c.Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := w.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("Watch after cancel = %v, want Canceled", err)
	}
}
