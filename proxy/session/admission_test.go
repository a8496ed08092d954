package session

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
)

// Each body reserves its size times its factor until Close; a successful
// answer that outgrows the reservation is held at its size; over the
// budget the exchange gets TF's 503 and gives everything back at once.
func TestAdmission(t *testing.T) {
	const (
		request = `{"instances": [1.0, 2.0, 5.0]}`
		answer  = `{"model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[2.5,3.0,4.5]}]}`
		// No data, yet a thousand "[]" lines: the TF body outgrows 32×.
		empties = `{"model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[1000,0],"data":[]}]}`
	)
	reqCost := int64(len(request)) * admission.RequestFactor
	respCost := int64(len(answer)) * admission.ResponseFactor
	cases := []struct {
		name     string
		budget   int64
		answer   string
		status   int   // 0: translated (200)
		inUse    int64 // after the answer, before Close; -1: the TF body's size
		rejected float64
	}{
		{"within the budget", reqCost + respCost, answer, 0, reqCost + respCost, 0},
		{"the answer over the budget", reqCost + respCost - 1, answer, 503, 0, 1},
		{"an answer held at its size", 1 << 20, empties, 0, -1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, "triton")
			e.cfg.Admission = admission.New(c.budget, e.metrics)
			s := predictSession(t, e, request)
			if got := e.cfg.Admission.InUse(); got != reqCost {
				t.Fatalf("after the request: %d reserved, want %d", got, reqCost)
			}
			ctx := context.Background()
			s.ResponseHeaders(ctx, 200, hdr{}, false)
			a := s.bufferedResponse(ctx, []byte(c.answer))
			switch {
			case c.status != 0:
				checkRespond(t, a, c.status, tfError(fmt.Sprintf("tfsbridge is over its in-flight memory budget (--max-inflight-bytes); "+
					"retry later: this body needs %d bytes of working memory, more than the whole in-flight budget of %d bytes", reqCost+respCost, c.budget)))
			case a.Verdict != Continue || !a.ReplaceBody:
				t.Fatalf("answer: %v %d %.200s", a.Verdict, a.Status, a.Body)
			}
			want := c.inUse
			if want < 0 {
				want = int64(len(a.Body))
				if want <= reqCost+int64(len(c.answer))*admission.ResponseFactor {
					t.Fatalf("a %d-byte answer fits its reservation: the case tests nothing", want)
				}
			}
			if got := e.cfg.Admission.InUse(); got != want {
				t.Errorf("after the answer: %d reserved, want %d", got, want)
			}
			s.Close()
			if got := e.cfg.Admission.InUse(); got != 0 {
				t.Errorf("after Close: %d reserved, want 0", got)
			}
			if got := e.metrics.Value("tfsbridge_admission_rejections_total"); got != c.rejected {
				t.Errorf("rejections = %v, want %v", got, c.rejected)
			}
		})
	}
	// A request over the budget never reaches the v2 server.
	e := newEnv(t, "triton")
	e.cfg.Admission = admission.New(reqCost-1, e.metrics)
	s := New(e.cfg)
	defer s.Close()
	ctx := context.Background()
	s.RequestHeaders(ctx, "POST", "/v1/models/half_plus_two:predict", hdr{}, false)
	a := s.bufferedRequest(ctx, []byte(request))
	if a.Verdict != Respond || a.Status != 503 || !strings.Contains(string(a.Body), "tfsbridge is over its in-flight memory budget") {
		t.Errorf("request over the budget: %v %d %s", a.Verdict, a.Status, a.Body)
	}
}

// A streamed body reserves StreamFactor per byte as its bytes arrive,
// never for a declared length alone (a declared length the budget could
// never take is refused on the first chunk, reserving nothing); and the
// translated body's size once it outgrows that.
func TestStreamAdmission(t *testing.T) {
	request := []byte(`{"instances": [1.0, 2.0, 5.0]}`)
	whole := int64(len(request)) * admission.StreamFactor
	cases := []struct {
		name     string
		declared bool
		budget   int64
		pending  int64 // reserved after the first 8-byte chunk; -1: refused there
		status   int   // 0: translated
	}{
		{"declared, within", true, 1 << 20, 8 * admission.StreamFactor, 0},
		{"declared, over: refused at once", true, whole - 1, -1, 503},
		{"undeclared, within", false, 1 << 20, 8 * admission.StreamFactor, 0},
		{"undeclared, over midway", false, whole - 1, 8 * admission.StreamFactor, 503},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, "triton")
			e.cfg.Admission = admission.New(c.budget, e.metrics)
			s := New(e.cfg)
			defer s.Close()
			ctx := context.Background()
			h := hdr{}
			if c.declared {
				h["content-length"] = fmt.Sprint(len(request))
			}
			s.RequestHeaders(ctx, "POST", "/v1/models/half_plus_two:predict", h, false)
			var rec recordSink
			a := s.RequestChunk(ctx, request[:8], false, &rec)
			if c.pending < 0 {
				if a.Verdict != Respond || a.Status != c.status {
					t.Fatalf("first chunk: %v %d %s, want %d", a.Verdict, a.Status, a.Body, c.status)
				}
				return
			}
			if got := e.cfg.Admission.InUse(); a.Verdict != Pending || got != c.pending {
				t.Fatalf("first chunk: %v, %d reserved; want pending, %d", a.Verdict, got, c.pending)
			}
			a = s.RequestChunk(ctx, request[8:], true, &rec)
			if c.status != 0 {
				if a.Verdict != Respond || a.Status != c.status || !strings.Contains(string(a.Body), "in-flight memory budget") {
					t.Fatalf("last chunk: %v %d %s, want %d", a.Verdict, a.Status, a.Body, c.status)
				}
				return
			}
			if a.Verdict != Continue {
				t.Fatalf("last chunk: %v %d %s", a.Verdict, a.Status, a.Body)
			}
			// The v2 body (header and 12 bytes) is larger than the
			// reservation of the 30-byte TF body: it is held at its size.
			if got, want := e.cfg.Admission.InUse(), max(whole, int64(len(rec.body))); got != want {
				t.Errorf("after the body: %d reserved, want %d", got, want)
			}
			s.Close()
			if got := e.cfg.Admission.InUse(); got != 0 {
				t.Errorf("after Close: %d reserved", got)
			}
		})
	}
}

// A streamed binary answer reserves StreamFactor per byte of it on top of
// what the request holds.
func TestStreamedResponseAdmission(t *testing.T) {
	e := newEnv(t, "triton")
	e.cfg.Admission = admission.New(1<<20, e.metrics)
	s := predictSession(t, e, `{"instances": [1.0, 2.0, 5.0]}`)
	held := e.cfg.Admission.InUse()
	header := `{"model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
	body := append([]byte(header), f32le(2.5, 3, 4.5)...)
	ctx := context.Background()
	s.ResponseHeaders(ctx, 200, hdr{"inference-header-content-length": fmt.Sprint(len(header))}, false)
	var rec recordSink
	if a := s.ResponseChunk(ctx, body[:10], false, &rec); a.Verdict != Pending {
		t.Fatalf("first chunk: %v", a.Verdict)
	}
	if got, want := e.cfg.Admission.InUse(), held+10*admission.StreamFactor; got != want {
		t.Errorf("after 10 bytes of answer: %d reserved, want %d (the request's %d and the answer's)", got, want, held)
	}
	if a := s.ResponseChunk(ctx, body[10:], true, &rec); a.Verdict != Continue {
		t.Fatalf("last chunk: %v %d %s", a.Verdict, a.Status, a.Body)
	}
	if got, want := e.cfg.Admission.InUse(), held+int64(len(body))*admission.StreamFactor; got != want {
		t.Errorf("after the answer: %d reserved, want %d", got, want)
	}
}

// An exchange that ends mid-body (the client went away) gives back its
// reservation and its decoder's blocks when the session closes.
func TestStreamAbandoned(t *testing.T) {
	e := newEnv(t, "triton")
	e.cfg.Admission = admission.New(1<<20, e.metrics)
	s := New(e.cfg)
	ctx := context.Background()
	s.RequestHeaders(ctx, "POST", "/v1/models/half_plus_two:predict", hdr{}, false)
	var rec recordSink
	if a := s.RequestChunk(ctx, []byte(`{"instances": [1.0, 2.`), false, &rec); a.Verdict != Pending {
		t.Fatalf("first chunk: %v", a.Verdict)
	}
	if e.cfg.Admission.InUse() == 0 {
		t.Fatal("nothing reserved for the body so far")
	}
	s.Close()
	if got := e.cfg.Admission.InUse(); got != 0 || s.req.dec != nil {
		t.Errorf("after Close: %d reserved, decoder %v", got, s.req.dec)
	}
	if got := e.metrics.Value("tfsbridge_requests_total", "code", "499"); got != 1 {
		t.Errorf("abandoned exchanges counted: %v, want 1 (499)", got)
	}
}

// Streamed exchanges follow the budget's age rule: a younger one that
// needs more than is left waits for the older one; when the older one
// needs room, the younger one (not waiting) is wounded and its next chunk
// gets the 503, releasing what it held; a declared length alone reserves
// nothing.
func TestStreamAdmissionAgePriority(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, "triton")
	// Room for 40 bytes of body at StreamFactor.
	e.cfg.Admission = admission.New(40*admission.StreamFactor, e.metrics)
	open := func(declared int) *Session {
		s := New(e.cfg)
		s.RequestHeaders(ctx, "POST", "/v1/models/half_plus_two:predict", hdr{"content-length": fmt.Sprint(declared)}, false)
		return s
	}
	var rec recordSink
	older, younger := open(36), open(36)
	defer older.Close()
	defer younger.Close()
	if a := older.RequestChunk(ctx, []byte(`{"instances": [1.0, `), false, &rec); a.Verdict != Pending {
		t.Fatalf("older: %v %d %s", a.Verdict, a.Status, a.Body)
	}
	if a := younger.RequestChunk(ctx, []byte(`{"instances": [`), false, &rec); a.Verdict != Pending {
		t.Fatalf("younger: %v %d %s", a.Verdict, a.Status, a.Body)
	}
	// 20 + 15 bytes received of the 72 declared: only those are held.
	if got, want := e.cfg.Admission.InUse(), int64(35*admission.StreamFactor); got != want {
		t.Fatalf("%d reserved, want %d (bytes received, not declared)", got, want)
	}
	wounded := younger.Admission().Wounded()
	// The older one needs 16 more bytes than are left: the younger is wounded.
	done := make(chan Action, 1)
	go func() { done <- older.RequestChunk(ctx, []byte(`2.0, 5.0, 7.0]}`), true, &rec) }()
	select {
	case <-wounded:
	case <-time.After(30 * time.Second): // only bounds a broken build
		t.Fatal("the younger exchange was not wounded")
	}
	if a := younger.RequestChunk(ctx, []byte(`1.0]}`), true, &rec); a.Verdict != Respond || a.Status != 503 ||
		!strings.Contains(string(a.Body), "older requests need the rest of the in-flight budget") {
		t.Fatalf("younger after the wound: %v %d %s", a.Verdict, a.Status, a.Body)
	}
	if a := <-done; a.Verdict != Continue {
		t.Fatalf("older: %v %d %s", a.Verdict, a.Status, a.Body)
	}
	if got, want := e.cfg.Admission.InUse(), int64(35*admission.StreamFactor); got < want {
		t.Errorf("%d reserved after the older body, want at least %d", got, want)
	}
	older.Close()
	younger.Close()
	if got := e.cfg.Admission.InUse(); got != 0 {
		t.Errorf("%d reserved after both ended", got)
	}
}
