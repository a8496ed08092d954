// Package mocktf serves TF Serving's REST API without TF Serving: tfsbridge's
// own translation, run in process as a reverse proxy, in front of a v2
// server (the built-in mock, internal/mockv2). It answers byte for byte as
// TF Serving would for the mock's models, so a newcomer, the demo and the
// tests can put a "TF Serving" server in a model map (kind: tfserving) and
// watch a split between it and a v2 server with nothing else running.
//
// It lives apart from mockv2 because it imports the bridge, whose own
// tests use mockv2.
package mocktf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/tfsbridge/tfsbridge/proxy/bridge"
)

// Options say what the TF Serving face fronts.
type Options struct {
	// V2URL is the v2 server's root, e.g. "http://127.0.0.1:8000".
	V2URL string
	// Kind is the v2 server's kind: "auto" (or ""), "triton", "kserve"
	// or "mlserver".
	Kind string
	// Logger receives the bridge's logs; nil discards them.
	Logger *slog.Logger
	// ModelMapFile is a model map for the face (empty: none), so that it
	// can serve a mock model under another TF name, as the demo's split
	// model on "TF Serving".
	ModelMapFile string
}

// Serve serves TF Serving's REST API on lis until ctx is done, then
// stops at once (the mock has no load balancer to drain from). It
// returns nil when ctx ended it.
func Serve(ctx context.Context, lis net.Listener, o Options) error {
	b, err := New(o)
	if err != nil {
		_ = lis.Close()
		return err
	}
	if err := b.Serve(ctx, bridge.Listeners{Proxy: lis}); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("TF Serving mock: %w", err)
	}
	return nil
}

// New builds the bridge of the TF Serving face, for a caller that
// chooses its own listeners.
func New(o Options) (*bridge.Bridge, error) {
	bo := bridge.DefaultOptions()
	bo.BackendURL, bo.BackendKind = o.V2URL, o.Kind
	if bo.BackendKind == "" {
		bo.BackendKind = "auto"
	}
	bo.Logger = o.Logger
	if bo.Logger == nil {
		bo.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	bo.DrainDelay = 0
	bo.ModelMapFile = o.ModelMapFile
	b, err := bridge.New(bo)
	if err != nil {
		return nil, fmt.Errorf("TF Serving mock: %w", err)
	}
	return b, nil
}
