package httpproxy

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestDirectClientConnections: the direct client (the default transport's
// small translated requests) keeps one connection for consecutive
// exchanges, and takes a new one when the server closed the idle one or
// said it would close it; every answer is the translated one.
func TestDirectClientConnections(t *testing.T) {
	for _, tc := range []struct {
		name string
		// between runs after each exchange on the v2 server.
		between   func(up *httptest.Server)
		closeConn bool // the v2 server answers Connection: close
		wantConns int64
	}{
		{name: "kept", between: func(*httptest.Server) {}, wantConns: 1},
		{name: "idle closed by the server", between: func(up *httptest.Server) { up.CloseClientConnections() }, wantConns: 3},
		{name: "Connection: close", between: func(*httptest.Server) {}, closeConn: true, wantConns: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conns atomic.Int64
			up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if tc.closeConn {
					w.Header().Set("Connection", "close")
				}
				binaryAnswer(w)
			}))
			up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					conns.Add(1)
				}
			}
			up.Start()
			t.Cleanup(up.Close)
			s := &setup{upstream: up.URL}
			s.start(t)
			for i := range 3 {
				resp, body := do(t, post(t, s.proxy.URL+"/v1/models/half_plus_two:predict", `{"instances": [1.0, 2.0, 5.0]}`))
				if resp.StatusCode != 200 || body != predictions {
					t.Fatalf("exchange %d: answer = %d %q, want 200 %q", i, resp.StatusCode, body, predictions)
				}
				tc.between(up)
			}
			if got := conns.Load(); got != tc.wantConns {
				t.Errorf("connections to the v2 server = %d, want %d", got, tc.wantConns)
			}
		})
	}
}
