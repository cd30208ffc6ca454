package main

import (
	"slices"
	"sync"

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
	srv *health.Server

	mu    sync.Mutex
	names []string        // "" first, then the services, sorted
	down  map[string]bool // the causes keeping probed from serving now
}

// newHealth returns the health service, serving, answering for the server
// ("") only until register adds the service names.
func newHealth() *healthStatus {
	h := &healthStatus{srv: health.NewServer(), names: []string{""}, down: map[string]bool{}}
	h.srv.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	return h
}

// register registers the health service on g and gives every service
// registered on g so far the server's status. Call it after registering
// the other services.
func (h *healthStatus) register(g *grpc.Server) {
	healthpb.RegisterHealthServer(g, h.srv)
	var services []string
	for name := range g.GetServiceInfo() {
		services = append(services, name)
	}
	slices.Sort(services)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.names = append([]string{""}, services...)
	h.applyLocked()
}

// set says whether cause ("store": it cannot write; "lease": the
// replica lost its lease) keeps probed from serving: every name is
// NOT_SERVING while any cause does, SERVING once none does. Watchers of
// each name are told. Safe for concurrent use; no effect after shutdown.
func (h *healthStatus) set(cause string, down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if down {
		h.down[cause] = true
	} else {
		delete(h.down, cause)
	}
	h.applyLocked()
}

func (h *healthStatus) applyLocked() {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if len(h.down) == 0 {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, name := range h.names {
		h.srv.SetServingStatus(name, st)
	}
}

// storeError is the engine's OnStoreError: every name is NOT_SERVING
// while the store cannot write (a full disk), SERVING again when it can.
func (h *healthStatus) storeError(err error) { h.set("store", err != nil) }

// shutdown reports every name NOT_SERVING for good: probed is stopping.
func (h *healthStatus) shutdown() { h.srv.Shutdown() }
