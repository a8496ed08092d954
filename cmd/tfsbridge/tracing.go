package main

import (
	"context"
	"github.com/tfsbridge/tfsbridge/internal/buildinfo"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/tracing"
)

// flushTimeout bounds the export of the last spans at exit.
const flushTimeout = 5 * time.Second

// startTracing sets up OpenTelemetry tracing from the OTEL_* environment
// (nothing unless an OTLP endpoint is set); stop flushes pending spans.
func startTracing(ctx context.Context, env func(string) (string, bool)) (stop func(), err error) {
	version := buildinfo.Get().Version
	shutdown, err := tracing.Setup(ctx, env, version)
	if err != nil {
		return nil, err
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		defer cancel()
		_ = shutdown(sctx)
	}, nil
}
