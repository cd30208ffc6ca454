package main

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// healthClient dials addr's health service.
func healthClient(t *testing.T, addr string) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// wantHealth checks the status of each service, or NotFound for want
// UNKNOWN.
func wantHealth(t *testing.T, hc healthpb.HealthClient, want healthpb.HealthCheckResponse_ServingStatus, services ...string) {
	t.Helper()
	for _, svc := range services {
		resp, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: svc})
		if want == healthpb.HealthCheckResponse_UNKNOWN {
			if status.Code(err) != codes.NotFound {
				t.Errorf("Check(%q) = %v, %v; want NotFound", svc, resp, err)
			}
			continue
		}
		if err != nil || resp.GetStatus() != want {
			t.Errorf("Check(%q) = %v, %v; want %v", svc, resp, err, want)
		}
	}
}

// TestHealthNamesEveryService: the health service answers for the server
// and every registered service by name, all set at once by set.
func TestHealthNamesEveryService(t *testing.T) {
	t.Parallel()
	g := grpc.NewServer()
	reflection.Register(g)
	h := newHealth()
	h.register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	hc := healthClient(t, lis.Addr().String())
	names := []string{"", "grpc.reflection.v1.ServerReflection", "grpc.health.v1.Health"}

	wantHealth(t, hc, healthpb.HealthCheckResponse_SERVING, names...)
	wantHealth(t, hc, healthpb.HealthCheckResponse_UNKNOWN, "probe.v1.Nope")

	watch, err := hc.Watch(t.Context(), &healthpb.HealthCheckRequest{Service: "grpc.reflection.v1.ServerReflection"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := watch.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: %v, %v; want SERVING first", m, err)
	}
	h.set("store", true)
	h.set("lease", true)
	h.set("store", false) // still down: the lease
	wantHealth(t, hc, healthpb.HealthCheckResponse_NOT_SERVING, names...)
	if m, err := watch.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch: %v, %v; want NOT_SERVING while a cause is down", m, err)
	}
	h.set("lease", false)
	wantHealth(t, hc, healthpb.HealthCheckResponse_SERVING, names...)
	h.shutdown()
	h.set("lease", false) // no effect after shutdown
	wantHealth(t, hc, healthpb.HealthCheckResponse_NOT_SERVING, names...)
}

// TestHealthOfProbed: a real probed answers `grpc-health-probe -service
// probe.v1.ProbeService`.
func TestHealthOfProbed(t *testing.T) {
	t.Parallel()
	addr := startServer(t, testConfig(t))
	wantHealth(t, healthClient(t, addr), healthpb.HealthCheckResponse_SERVING, "", "probe.v1.ProbeService", "grpc.reflection.v1.ServerReflection")
}
