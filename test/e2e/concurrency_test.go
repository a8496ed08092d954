package e2e

import (
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentExchanges sends the Triton predict cases from several
// clients at once through each transport: sessions share one backend
// client, metadata cache and gRPC connection, and no answer may leak into
// another exchange.
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
							got, err := send(t.Context(), s.client, s.url(via), c.req)
							switch {
							case err != nil:
								errs <- fmt.Sprintf("%s: %v", c.name, err)
							case got.status != want.status || string(got.body) != want.body:
								errs <- fmt.Sprintf("%s: %d %q, want %d %q", c.name, got.status, got.body, want.status, want.body)
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
