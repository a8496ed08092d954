package httpproxy

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/internal/fakev2"
)

// writeCounter counts the writes made on a connection.
type writeCounter struct {
	net.Conn
	writes *atomic.Int64
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestUpstreamRequestOneWrite: a small translated request goes to the v2
// server in one write, headers and body together (it took two while the
// headers were flushed before the body).
func TestUpstreamRequestOneWrite(t *testing.T) {
	var writes atomic.Int64
	tr := backend.NewTransport(time.Second)
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeCounter{Conn: c, writes: &writes}, nil
	}
	s := &setup{transport: tr, v2: fakev2.New(t, "triton", halfPlusTwo)}
	s.v2.SetInfer(func(w http.ResponseWriter, _ *http.Request) { binaryAnswer(w) })
	s.start(t)
	for i := 1; i <= 3; i++ {
		resp, body := do(t, post(t, s.proxy.URL+"/v1/models/half_plus_two:predict", `{"instances": [1.0, 2.0, 5.0]}`))
		if resp.StatusCode != 200 || body != predictions {
			t.Fatalf("answer %d %q", resp.StatusCode, body)
		}
		if got := writes.Load(); got != int64(i) {
			t.Errorf("after %d requests: %d writes upstream, want one per request", i, got)
		}
	}
}
