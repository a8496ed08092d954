package session

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// A copy's room (its Copy and the buffers holding the request and the
// primary's answer) is not reused while the engine still reads it: the
// next exchanges, whose copies are dropped and whose rooms go straight
// back to the pool, answer with other values while the first copy
// waits for the shadow's answer; that copy must still compare the
// shadow's answer with its own primary's (a match), not with a later
// exchange's (a mismatch).
func TestShadowRoomHeldByCopy(t *testing.T) {
	const want = "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"
	ts := newTFShadow(t, 200, want)
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open) // before the server's Close waits for its handlers
	ts.mu.Lock()
	ts.gate, ts.entered = gate, make(chan struct{}, 1)
	ts.mu.Unlock()
	e, eng := shadowEnv(t, ts, 1<<20)
	e.cfg.Mapping().Map.Model("half_plus_two").Shadow.MaxInflight = 1
	header := `{"model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
	rh := hdr{"content-type": "application/octet-stream", "inference-header-content-length": strconv.Itoa(len(header))}
	ctx := context.Background()
	exchange := func(y ...float32) {
		t.Helper()
		s := New(e.cfg)
		defer s.Close() // the copy is handed over here
		s.RequestHeaders(ctx, "POST", "/v1/models/half_plus_two:predict", hdr{}, false)
		if a := s.bufferedRequest(ctx, []byte(`{"instances": [1.0, 2.0, 5.0]}`)); a.Verdict != Continue {
			t.Fatalf("request: %v %d %s", a.Verdict, a.Status, a.Body)
		}
		s.ResponseHeaders(ctx, 200, rh, false)
		if a := s.bufferedResponse(ctx, append([]byte(header), f32le(y...)...)); a.Verdict != Continue {
			t.Fatalf("response: %v %d %s", a.Verdict, a.Status, a.Body)
		}
	}
	exchange(2.5, 3, 4.5)
	select { // the first copy waits for its answer, its room in use
	case <-ts.entered:
	case <-time.After(30 * time.Second): // a busy machine's bound; it comes in milliseconds
		t.Fatal("the first copy never reached the shadow")
	}
	const later = 10
	for range later {
		exchange(9, 9, 9) // each dropped (max_inflight), its room reused
	}
	open()
	got := waitResults(t, e.metrics, eng, 1+later)
	if got[observe.ShadowMatch] != 1 || got[observe.ShadowDropped] != later || len(got) != 2 {
		t.Errorf("results %v, want one match and %d dropped", got, later)
	}
}
