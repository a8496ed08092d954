package backend

import (
	"strings"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// callKind names a control call by its path, for the call label of
// tfsbridge_backend_request_duration_seconds.
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

// observeCall records the duration of the call to path started at start.
func (c *Client) observeCall(path string, start time.Time) {
	c.cfg.Metrics.BackendCall(callKind(path), time.Since(start))
}
