package session

import (
	"context"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// signature asks the backend for r's signature, unless no v2 path can
// name r's model safely ("..", see route.Route.V2Safe): such a name is no
// servable's, and its paths must never be sent, whatever Backend says.
// Every verb looks the signature up first, so this one guard keeps the
// name away from the v2 server for predict, status and metadata alike.
func (s *Session) signature(ctx context.Context, r route.Route) (*tensor.Signature, error) {
	if !r.V2Safe() {
		return nil, apierr.New(apierr.NotFound, "Servable not found for request: "+r.Servable())
	}
	return s.cfg.Backend.Signature(ctx, r)
}
