package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentExchanges sends the Triton predict cases from several
// clients at once through each transport: sessions share one backend
// client, metadata cache and gRPC connection, and no answer (nor its
// x-request-id) may leak into another exchange.
func TestConcurrentExchanges(t *testing.T) {
	s := newStack(t, stackConfig{})
	const clients, rounds = 8, 4
	for _, via := range transports {
		t.Run(via, func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make(chan string, clients*rounds*len(predictCases))
			for w := range clients {
				wg.Go(func() {
					for r := range rounds {
						for i := range predictCases {
							// Each client walks the cases from its own offset.
							c := predictCases[(i+w*5+r)%len(predictCases)]
							want := c.expectFor(triton, via)
							// Each exchange its own request id, of its own
							// length: the id goes back in a header list built
							// in a pooled per-stream room (extproc) or map
							// (the proxy's small path), and must never be
							// another exchange's.
							rq := c.req
							id := fmt.Sprintf("c%d-r%d-i%d-%s", w, r, i, strings.Repeat("x", (w*7+r+i)%23))
							rq.header = maps.Clone(rq.header)
							if rq.header == nil {
								rq.header = map[string]string{}
							}
							rq.header["x-request-id"] = id
							got, err := send(t.Context(), s.client, s.url(via), rq)
							switch {
							case err != nil:
								errs <- fmt.Sprintf("%s: %v", c.name, err)
							case got.status != want.status || string(got.body) != want.body:
								errs <- fmt.Sprintf("%s: %d %q, want %d %q", c.name, got.status, got.body, want.status, want.body)
							case !slices.Equal(got.header.Values("X-Request-Id"), []string{id}):
								errs <- fmt.Sprintf("%s: x-request-id %q, want %q", c.name, got.header.Values("X-Request-Id"), id)
							}
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
		})
	}
}
