package robustness

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// mixedRequest is one request of the concurrent mix and its exact answer.
type mixedRequest struct {
	name, method, path, body string
	status                   int
	want                     string // "" checks only that a failure is a TF error
}

var mixed = []mixedRequest{
	{"row predict", "POST", "/v1/models/half_plus_two:predict", `{"instances": [1.0, 2.0, 5.0]}`,
		200, "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"},
	{"columnar predict", "POST", "/v1/models/half_plus_two:predict", `{"inputs": [1.0]}`,
		200, "{\n    \"outputs\": [\n        2.5\n    ]\n}"},
	{"batched INT32", "POST", "/v1/models/simple:predict",
		`{"instances": [{"INPUT0": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1], "INPUT1": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`,
		200, "{\n    \"predictions\": [\n        {\n            \"OUTPUT0\": [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2],\n" +
			"            \"OUTPUT1\": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n        }\n    ]\n}"},
	{"slow model", "POST", "/v1/models/slow:predict", `{"instances": [1.0]}`,
		200, "{\n    \"predictions\": [1.0\n    ]\n}"},
	{"syntax error", "POST", "/v1/models/half_plus_two:predict", `{"instances": [1,}`,
		400, string(tfresponse.Error(nil, "JSON Parse error: Invalid value. at offset: 17"))},
	{"deep nesting", "POST", "/v1/models/half_plus_two:predict", `{"instances":` + strings.Repeat("[", 150),
		400, string(tfresponse.Error(nil, "JSON Parse error: Document nests deeper than the limit. at offset: 112"))},
	{"unknown model", "POST", "/v1/models/nope:predict", `{"instances": [1.0]}`,
		404, string(tfresponse.Error(nil, "Servable not found for request: Latest(nope)"))},
	{"wrong type", "POST", "/v1/models/simple:predict", `{"instances": [{"INPUT0": 1.5, "INPUT1": 1}]}`,
		400, string(tfresponse.Error(nil, "Failed to process element: 0 key: INPUT0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: 1.5 Type: Number is not of expected type: int32"))},
	{"upstream garbage", "POST", "/v1/models/garbage:predict", `{"instances": [1.0]}`, 502, ""},
	{"status", "GET", "/v1/models/half_plus_two", "",
		200, "{\n \"model_version_status\": [\n  {\n   \"version\": \"1\",\n   \"state\": \"AVAILABLE\",\n   \"status\": {\n    \"error_code\": \"OK\",\n    \"error_message\": \"\"\n   }\n  }\n ]\n}\n"},
	{"malformed path", "POST", "/v1/models/half_plus_two:PREDICT", `{}`,
		400, string(tfresponse.Error(nil, "Malformed request: POST /v1/models/half_plus_two:PREDICT"))},
	{"native v2 passes through", "GET", "/v2/health/ready", "", 200, ""},
}

// TestConcurrentMixed runs 64 clients at once through each transport for
// a bounded number of requests each, mixing good and bad ones; every
// answer must be exactly the one it gets alone. Run with -race.
func TestConcurrentMixed(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	base := runtime.NumGoroutine()
	mock := startMock(t, "triton")
	// No request of the mix relies on a timeout: a patient stack, as 64
	// clients at once on a busy 2-core machine can keep a request waiting
	// for seconds.
	s := newStack(t, patient(stackConfig{upstream: mock.URL}))
	// A few seconds per transport, and never more than maxPerWorker
	// requests per client, so the run stays short even under -race; but
	// every client sends at least minPerWorker whatever the clock says
	// (on a busy machine a goroutine may first run after the deadline),
	// so every request of the mix goes through every transport.
	const workers, minPerWorker, maxPerWorker = 64, 2, 100
	var done atomic.Int64
	start := time.Now()
	for _, via := range transports {
		deadline := time.Now().Add(2 * time.Second)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range maxPerWorker {
					if i >= minPerWorker && time.Now().After(deadline) {
						return
					}
					m := mixed[(w+i)%len(mixed)]
					var body []byte
					if m.method == "POST" {
						body = []byte(m.body)
					}
					a := s.send(via, m.method, m.path, body, nil)
					done.Add(1)
					what := fmt.Sprintf("%s via %s (worker %d)", m.name, via, w)
					switch {
					case a.err != nil:
						t.Errorf("%s: %v", what, a.err)
					case a.status != m.status:
						t.Errorf("%s: status %d %.200q, want %d", what, a.status, a.body, m.status)
					case m.want != "" && a.body != m.want:
						t.Errorf("%s: body %q, want %q", what, a.body, m.want)
					case m.want == "" && m.status >= 400 && !isTFError(a.body):
						t.Errorf("%s: body %.200q is not a TF error", what, a.body)
					}
				}
			}()
		}
		wg.Wait()
	}
	t.Logf("%d requests in %v", done.Load(), time.Since(start).Round(time.Millisecond))
	s.close()
	mock.Close()
	waitGoroutines(t, base+2, settleTimeout)
}

// TestMetadataSingleFlight: concurrent requests for models whose metadata
// nobody has fetched yet cause exactly one metadata and one config call per
// model at the v2 server, whichever transport they come through.
func TestMetadataSingleFlight(t *testing.T) {
	h := startHostile(t)
	s := newStack(t, patient(stackConfig{upstream: h.URL()})) // slowmeta_ takes 300 ms of the 64 requests' time
	const models, perModel = 8, 8
	var wg sync.WaitGroup
	for m := range models {
		for i := range perModel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				model := "slowmeta_" + strconv.Itoa(m)
				a := s.post(transports[i%len(transports)], "/v1/models/"+model+":predict", []byte(`{"instances":[1.0]}`))
				checkAnswer(t, model, a, 200, "")
			}()
		}
	}
	wg.Wait()
	for m := range models {
		model := "slowmeta_" + strconv.Itoa(m)
		meta, config, infer := h.Hits("/v2/models/"+model), h.Hits("/v2/models/"+model+"/config"), h.Hits("/v2/models/"+model+"/infer")
		if meta != 1 || config != 1 || infer != perModel {
			t.Errorf("%s: %d metadata, %d config and %d infer calls; want 1, 1 and %d", model, meta, config, infer, perModel)
		}
	}
}
