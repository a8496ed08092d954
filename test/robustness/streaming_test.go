package robustness

import (
	"bytes"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
)

// floatBody is a TF predict body of n values written as "0.123456," (9
// bytes of JSON for 4 bytes of FP32 tensor), produced as it is read so
// that the test holds none of it.
type floatBody struct {
	head, tail []byte
	n          int // values still to write
	pending    []byte
}

var floatValue = []byte("0.123456,")

func newFloatBody(n int) *floatBody {
	return &floatBody{head: []byte(`{"instances": [`), tail: []byte(`0.5]}`), n: n - 1}
}

// Len is the body's length in bytes.
func (b *floatBody) Len() int64 {
	return int64(len(b.head) + b.n*len(floatValue) + len(b.tail))
}

func (b *floatBody) Read(p []byte) (int, error) {
	w := 0
	for w < len(p) {
		if len(b.pending) == 0 {
			switch {
			case b.head != nil:
				b.pending, b.head = b.head, nil
			case b.n > 0:
				k := min(b.n, 4096)
				b.pending = bytes.Repeat(floatValue, k)
				b.n -= k
			case b.tail != nil:
				b.pending, b.tail = b.tail, nil
			default:
				if w == 0 {
					return 0, io.EOF
				}
				return w, nil
			}
		}
		c := copy(p[w:], b.pending)
		b.pending = b.pending[c:]
		w += c
	}
	return w, nil
}

// TestStreamedBodyMemory sends a ~64 MB TF JSON predict body through the
// streaming transports and holds the process's peak heap growth under
// twice the v2 tensor: the JSON text is never held, only the tensor it
// fills (issue 12).
//
// The heap is measured with the collector at GOGC=25: at the default 100
// a heap whose live part is the 28 MB tensor may hold as much again in
// garbage not yet collected (here the gRPC messages the 64 MB arrive in,
// which protobuf copies out of gRPC's buffers), which says nothing about
// what the translation keeps. The Envoy stand-in runs in this process
// too, and its buffers count.
func TestStreamedBodyMemory(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("heap measurement")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	const values = 7 << 20 // 7 Mi values: 63 MiB of JSON, 28 MiB of FP32
	tensorBytes := uint64(values * 4)
	h := startHostile(t)
	s := newStack(t, stackConfig{upstream: h.URL(), maxBody: 96 << 20, maxInflight: 1 << 30,
		requestTimeout: time.Minute, readTimeout: time.Minute, routeTimeout: time.Minute, backendTimeout: time.Minute})
	for _, via := range streamingTransports {
		t.Run(via, func(t *testing.T) {
			body := newFloatBody(values)
			size := body.Len()
			var status int
			var err error
			peak := heapPeak(func() {
				req, _ := http.NewRequest("POST", s.url(via)+"/v1/models/good:predict", body)
				req.ContentLength = size
				req.Header.Set("Content-Type", "application/json")
				var resp *http.Response
				if resp, err = s.client.Do(req); err == nil {
					status = resp.StatusCode
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
			t.Logf("%d-byte JSON body, %d-byte tensor: peak heap growth %d bytes (%.2f× the tensor, %.2f× the JSON)",
				size, tensorBytes, peak, float64(peak)/float64(tensorBytes), float64(peak)/float64(size))
			if err != nil || status != 200 {
				t.Fatalf("answer %d %v", status, err)
			}
			if peak > 2*tensorBytes {
				t.Errorf("peak heap growth %d bytes, over twice the tensor (%s bytes)", peak, strconv.FormatUint(2*tensorBytes, 10))
			}
		})
	}
}

// TestStreamedBurstBounded sends eight large requests at once through
// each streaming transport with an in-flight budget that holds three:
// each declares its length, so the budget refuses the excess with TF's
// 503 on their first bytes, and the heap grows by no more than the budget
// (plus the stand-in's and the gRPC messages' slack).
func TestStreamedBurstBounded(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("heap measurement")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	const values = 1 << 20 // 9 MiB of JSON each
	size := newFloatBody(values).Len()
	budget := 3 * size * admission.StreamFactor
	h := startHostile(t)
	s := newStack(t, stackConfig{upstream: h.URL(), maxBody: 16 << 20, maxInflight: budget,
		requestTimeout: time.Minute, readTimeout: time.Minute, routeTimeout: time.Minute})
	for _, via := range streamingTransports {
		t.Run(via, func(t *testing.T) {
			codes := map[int]int{}
			var mu sync.Mutex
			peak := heapPeak(func() {
				var wg sync.WaitGroup
				start := make(chan struct{})
				for range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						req, _ := http.NewRequest("POST", s.url(via)+"/v1/models/good:predict", newFloatBody(values))
						req.ContentLength = size
						status := 0
						if resp, err := s.client.Do(req); err == nil {
							status = resp.StatusCode
							_, _ = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
						mu.Lock()
						codes[status]++
						mu.Unlock()
					}()
				}
				close(start)
				wg.Wait()
			})
			t.Logf("answers %v; peak heap growth %d bytes (%.2f× the %d-byte budget)", codes, peak, float64(peak)/float64(budget), budget)
			if codes[200] == 0 || codes[503] == 0 || codes[200]+codes[503] != 8 {
				t.Errorf("answers %v, want some 200 and the rest 503", codes)
			}
			if limit := uint64(budget) + 32<<20; peak > limit {
				t.Errorf("peak heap growth %d bytes, over the budget %d + 32 MiB", peak, budget)
			}
		})
	}
}
