package backend

import (
	"context"
	"strings"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/tracing"
)

// callKind names a control call by its path, for the call label of
// tfsbridge_backend_request_duration_seconds and the call's span. Model
// paths are /v2/models/{name}[/versions/{v}][/ready|/config] with the name
// path-escaped, so an even segment count means a trailing ready or config
// (a model may well be named "ready").
func callKind(path string) string {
	rest, ok := strings.CutPrefix(path, "/v2/models/")
	if !ok {
		if path == "/v2" {
			return observe.CallServer
		}
		return observe.CallReady // /v2/health/ready
	}
	segs := strings.Split(rest, "/")
	if len(segs)%2 == 1 {
		return observe.CallMetadata
	}
	if segs[len(segs)-1] == "config" {
		return observe.CallConfig
	}
	return observe.CallReady
}

// startCall starts timing and tracing the control call to path; done
// records its duration and ends its span with its error.
func (c *Client) startCall(ctx context.Context, path string) (_ context.Context, done func(error)) {
	call, start := callKind(path), time.Now()
	ctx, span := tracing.StartBackend(ctx, call, path)
	return ctx, func(err error) {
		c.cfg.Metrics.BackendCall(c.ServerName(), call, time.Since(start))
		tracing.Failed(span, err)
		span.End()
	}
}
