package backend

import (
	"context"
	"strings"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/tracing"
)

// callKind names a control call by its path, for the call label of
// tfsbridge_backend_request_duration_seconds and the call's span.
func callKind(path string) string {
	switch {
	case path == "/v2":
		return observe.CallServer
	case strings.HasSuffix(path, "/ready"):
		return observe.CallReady
	case strings.HasSuffix(path, "/config"):
		return observe.CallConfig
	}
	return observe.CallMetadata
}

// startCall starts timing and tracing the control call to path; done
// records its duration and ends its span with its error.
func (c *Client) startCall(ctx context.Context, path string) (_ context.Context, done func(error)) {
	call, start := callKind(path), time.Now()
	ctx, span := tracing.StartBackend(ctx, call, path)
	return ctx, func(err error) {
		c.cfg.Metrics.BackendCall(call, time.Since(start))
		tracing.Failed(span, err)
		span.End()
	}
}
