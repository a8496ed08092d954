package bridge

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The TF gRPC listener's grpc.health.v1 follows the bridge's readiness:
// SERVING while it serves, NOT_SERVING for the TF services too once it
// drains, while the listener still answers.
func TestTFGRPCHealthDrain(t *testing.T) {
	up := &toggledV2{}
	up.ready.Store(true)
	v2 := httptest.NewServer(up)
	t.Cleanup(v2.Close)
	o := DefaultOptions()
	// The health service calls no v2 server: the gRPC address is never dialled.
	o.BackendURL, o.BackendKind, o.TFGRPCBackend = v2.URL, "triton", "127.0.0.1:1"
	// Long enough for the checks below on a busy machine; Serve returns after it.
	o.DrainDelay = 3 * time.Second
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(Addrs{Extproc: "127.0.0.1:0", TFGRPC: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, l) }()
	hc := healthClient(t, l.TFGRPC.Addr().String(), nil)
	for _, svc := range []string{"", "tensorflow.serving.PredictionService"} {
		if got := healthOf(t, hc, svc); got != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("TF gRPC health %q before shutdown = %v", svc, got)
		}
	}
	cancel()
	eventually(t, 30*time.Second, "the bridge draining", func() bool { return b.Ready(context.Background()) != nil })
	for _, svc := range []string{"", "tensorflow.serving.ModelService"} {
		if got := healthOf(t, hc, svc); got != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("TF gRPC health %q while draining = %v, want NOT_SERVING", svc, got)
		}
	}
	waitServe(t, done, 60*time.Second)
}
