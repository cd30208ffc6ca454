package main

import (
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// healthStatus is probed's grpc.health.v1 service. It answers for the
// server ("") and for each service registered on the gRPC server by its
// full name (probe.v1.ProbeService, grpc.reflection.v1.ServerReflection,
// ...), so `grpc-health-probe -service probe.v1.ProbeService` works; every
// name has the same status, since probed serves all of them or none.
type healthStatus struct {
	srv   *health.Server
	names []string // "" first, then the services, sorted
}

// registerHealth registers the health service on g and reports every
// service registered on g so far, and the server, SERVING. Call it after
// registering the other services.
func registerHealth(g *grpc.Server) *healthStatus {
	h := &healthStatus{srv: health.NewServer(), names: []string{""}}
	healthpb.RegisterHealthServer(g, h.srv)
	var services []string
	for name := range g.GetServiceInfo() {
		services = append(services, name)
	}
	slices.Sort(services)
	h.names = append(h.names, services...)
	h.setServing(true)
	return h
}

// setServing reports every name SERVING (true) or NOT_SERVING (false), for
// instance NOT_SERVING while the store cannot be written. Watchers of each
// name are told. Safe for concurrent use; no effect after shutdown.
func (h *healthStatus) setServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, name := range h.names {
		h.srv.SetServingStatus(name, st)
	}
}

// shutdown reports every name NOT_SERVING for good: probed is stopping.
func (h *healthStatus) shutdown() { h.srv.Shutdown() }
