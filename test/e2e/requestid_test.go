package e2e

import (
	"testing"
)

// Every answer carries x-request-id, through either transport: the
// client's (Envoy keeps it), or one made for the exchange.
func TestRequestIDReturned(t *testing.T) {
	s := newStack(t, stackConfig{})
	for _, via := range transports {
		for _, tt := range []struct {
			name string
			req  request
			code int
		}{
			{"translated", request{path: "/v1/models/half_plus_two:predict", body: readmeBody}, 200},
			{"immediate", request{path: "/v1/models/half_plus_two"}, 200},
			{"error", request{path: "/v1/models/nope:predict", body: readmeBody}, 404},
		} {
			for _, sent := range []string{"", "client-id-42"} {
				t.Run(via+"/"+tt.name+"/"+sent, func(t *testing.T) {
					rq := tt.req
					if sent != "" {
						rq.header = map[string]string{"x-request-id": sent}
					}
					r := s.do(t, via, rq)
					got := r.header.Values("X-Request-Id")
					switch {
					case r.status != tt.code:
						t.Errorf("status %d, want %d", r.status, tt.code)
					case len(got) != 1:
						t.Errorf("x-request-id %q, want exactly one", got)
					case sent != "" && got[0] != sent:
						t.Errorf("x-request-id %q, want the client's %q", got[0], sent)
					case sent == "" && len(got[0]) != 36:
						t.Errorf("x-request-id %q, want a generated UUID", got[0])
					}
				})
			}
		}
	}
}
