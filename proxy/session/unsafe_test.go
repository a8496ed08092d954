package session

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// anyModel is a backend that knows every model name, "..", too.
type anyModel struct {
	staticBackend
	calls *atomic.Int64
}

func (b anyModel) Signature(_ context.Context, _ route.Route) (*tensor.Signature, error) {
	b.calls.Add(1)
	return b.sig, nil
}

// TestUnsafeModelNames: whatever the backend says, a model no v2 path can
// name safely is an unknown servable, with TF's text for each verb, and
// the backend is never asked.
func TestUnsafeModelNames(t *testing.T) {
	calls := new(atomic.Int64)
	cfg := &Config{Backend: anyModel{newStaticBackend(), calls}, MaxBodyBytes: 1 << 16}
	ctx := context.Background()
	tests := []struct {
		method, path string
		body         string
		msg          string
	}{
		{"POST", "/v1/models/%2E%2E:predict", `{"instances":[1.0]}`, "Servable not found for request: Latest(..)"},
		{"POST", "/v1/models/../versions/2:predict", `{"instances":[1.0]}`, "Servable not found for request: Specific(.., 2)"},
		{"GET", "/v1/models/%2e/metadata", "", "Servable not found for request: Latest(.)"},
		{"GET", "/v1/models/..%2Fm", "", "Could not find any versions of model ../m"},
		{"GET", "/v1/models/%2E%2E/versions/4", "", "Could not find version 4 of model .."},
	}
	for _, tc := range tests {
		s := New(cfg)
		a := s.RequestHeaders(ctx, tc.method, tc.path, hdr{}, false)
		if tc.method == "POST" {
			a = s.bufferedRequest(ctx, []byte(tc.body))
		}
		checkRespond(t, a, 404, tfError(tc.msg))
		s.Close()
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the backend was asked %d times", n)
	}
}
