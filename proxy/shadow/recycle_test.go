package shadow

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// rtFunc is a RoundTripper that is not net/http's *http.Transport: the
// engine sends every copy through it.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A copy's Recycle is called once, and only when the engine no longer
// reads the copy: after its result is counted (a run), at once (a
// drop), never when net/http may still read its request body (sent
// through a transport the engine does not own). A submitter reuses the
// copy's memory when Recycle comes: any earlier would hand a copy still
// being sent or compared another exchange's bytes.
func TestCopyRecycle(t *testing.T) {
	for _, tc := range []struct {
		name      string
		transport bool // through an injected RoundTripper
		want      int  // Recycle calls
	}{
		{name: "own client", want: 1},
		{name: "net/http", transport: true, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			entered := make(chan struct{}, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				entered <- struct{}{}
				<-release
				_, _ = w.Write([]byte(primaryOK))
			}))
			t.Cleanup(srv.Close)
			var once sync.Once
			unblock := func() { once.Do(func() { close(release) }) }
			t.Cleanup(unblock) // before srv.Close waits for the handler
			u, _ := url.Parse(srv.URL)
			var o Options
			if tc.transport {
				tr := &http.Transport{}
				t.Cleanup(tr.CloseIdleConnections)
				o.Transport = rtFunc(tr.RoundTrip)
			}
			h := newHarness(t, o, 1)
			var calls atomic.Int32
			var countedFirst atomic.Bool
			c := h.copyOf(Target{Name: "tf", Kind: KindTFServing, URL: u}, predictPath, predictBody, ok(primaryOK))
			c.Recycle = func() {
				countedFirst.Store(h.count(observe.ShadowMatch) == 1)
				calls.Add(1)
			}
			h.e.Submit(c)
			<-entered
			// The copy is being sent: a second one is dropped, and
			// recycled before Submit returns.
			var dropped atomic.Int32
			d := h.copyOf(Target{Name: "tf", Kind: KindTFServing, URL: u}, predictPath, predictBody, ok(primaryOK))
			d.Recycle = func() { dropped.Add(1) }
			h.e.Submit(d)
			if n := dropped.Load(); n != 1 {
				t.Errorf("the dropped copy was recycled %d times, want once at Submit", n)
			}
			if n := calls.Load(); n != 0 {
				t.Fatalf("the copy was recycled while its call was waiting for its answer")
			}
			unblock()
			h.wait(2)
			h.e.Close() // waits for the worker: whatever it recycles is done
			h.expect(map[string]int{observe.ShadowMatch: 1, observe.ShadowDropped: 1})
			if n := calls.Load(); int(n) != tc.want {
				t.Fatalf("recycled %d times, want %d", n, tc.want)
			}
			if tc.want > 0 && !countedFirst.Load() {
				t.Error("recycled before its result was counted")
			}
		})
	}
}
