package extproc

import (
	"context"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// healthServices are the names health checkers ask about: "" (the whole
// server) and the ext_proc service, which is what Envoy's gRPC health
// checks name.
var healthServices = []string{"", extprocv3.ExternalProcessor_ServiceDesc.ServiceName}

// SetServing sets the health status of every service; after Shutdown it
// does nothing (NOT_SERVING stays).
func (s *Server) SetServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, name := range healthServices {
		s.Health.SetServingStatus(name, st)
	}
}

// readyHealth is grpc.health.v1 whose Check also asks the readiness
// function live, so that a gRPC health check and /readyz never disagree.
// Watch and List report the status last set (SetServing, Shutdown).
type readyHealth struct {
	*health.Server
	ready func(context.Context) error
}

// Check answers an unknown service NOT_FOUND, then from ready when set
// (which must fail once the server shuts down), else from the status set.
func (h *readyHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	resp, err := h.Server.Check(ctx, req)
	if err != nil || h.ready == nil {
		return resp, err
	}
	st := healthpb.HealthCheckResponse_SERVING
	if h.ready(ctx) != nil {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}
