package mockv2

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	for _, k := range []string{"", "triton", "KServe", "mlserver"} {
		if _, err := New(Options{Kind: k}); err != nil {
			t.Errorf("New(%q): %v", k, err)
		}
	}
	if _, err := New(Options{Kind: "torchserve"}); err == nil {
		t.Error("New(torchserve) succeeded")
	}
}

func TestModelsList(t *testing.T) {
	got := Models()
	if !slices.IsSorted(got) {
		t.Errorf("Models() not sorted: %v", got)
	}
	for _, want := range []string{"half_plus_two", "simple", "bytes_echo", "half_times_two", "multi_out",
		"mixed_types", "fixed3", "identity_int64", "image_classifier", "slow", "garbage"} {
		if !slices.Contains(got, want) {
			t.Errorf("Models() lacks %s", want)
		}
	}
}

// TestEndpoints checks every non-infer endpoint of every kind byte for byte.
func TestEndpoints(t *testing.T) {
	type tc struct {
		method, path string
		status       int
		body         string
		ctype        string
	}
	halfMeta := `"inputs":[{"name":"x","datatype":"FP32","shape":[-1]}],"outputs":[{"name":"y","datatype":"FP32","shape":[-1]}]}`
	kinds := map[string][]tc{
		"triton": {
			{"GET", "/v2/health/live", 200, "", ""},
			{"GET", "/v2/health/ready", 200, "", ""},
			{"POST", "/v2/health/ready", 405, `{"error":"Method Not Allowed"}`, "application/json"},
			{"GET", "/v2/models/half_plus_two", 200, `{"name":"half_plus_two","versions":["1"],"platform":"tensorflow_savedmodel",` + halfMeta, "application/json"},
			{"GET", "/v2/models/half_plus_two/versions/1", 200, `{"name":"half_plus_two","versions":["1"],"platform":"tensorflow_savedmodel",` + halfMeta, "application/json"},
			{"GET", "/v2/models/half%5Fplus%5Ftwo/ready", 200, "", ""},
			{"GET", "/v2/models/nope/ready", 404, `{"error":"Request for unknown model: 'nope' is not found"}`, "application/json"},
			{"GET", "/v2/models/mixed_types/config", 200, `{"name":"mixed_types","platform":"pytorch_libtorch","backend":"pytorch","version_policy":{"latest":{"num_versions":1}},"max_batch_size":8,` +
				`"input":[{"name":"flag","data_type":"TYPE_BOOL","format":"FORMAT_NONE","dims":[1],"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false},` +
				`{"name":"count","data_type":"TYPE_INT64","format":"FORMAT_NONE","dims":[1],"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false},` +
				`{"name":"value","data_type":"TYPE_FP64","format":"FORMAT_NONE","dims":[1],"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false}],` +
				`"output":[{"name":"not_flag","data_type":"TYPE_BOOL","dims":[1],"label_filename":"","is_shape_tensor":false},` +
				`{"name":"count_plus_one","data_type":"TYPE_INT64","dims":[1],"label_filename":"","is_shape_tensor":false},` +
				`{"name":"scaled","data_type":"TYPE_FP64","dims":[1],"label_filename":"","is_shape_tensor":false}]}`, "application/json"},
			{"GET", "/v2/models/bytes_echo/config", 200, `{"name":"bytes_echo","platform":"python","backend":"python","version_policy":{"latest":{"num_versions":1}},"max_batch_size":0,` +
				`"input":[{"name":"text","data_type":"TYPE_STRING","format":"FORMAT_NONE","dims":[-1],"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false}],` +
				`"output":[{"name":"echo","data_type":"TYPE_STRING","dims":[-1],"label_filename":"","is_shape_tensor":false},` +
				`{"name":"echo_bytes","data_type":"TYPE_STRING","dims":[-1],"label_filename":"","is_shape_tensor":false}]}`, "application/json"},
			{"GET", "/v2/models", 404, `{"error":"Not Found"}`, "application/json"},
			{"GET", "/v1/models/half_plus_two", 404, `{"error":"Not Found"}`, "application/json"},
			{"GET", "/v2/models/half_plus_two/infer/extra", 404, `{"error":"Not Found"}`, "application/json"},
		},
		"kserve": {
			{"GET", "/v2", 200, `{"name":"kserve","version":"0.20.0","extensions":["model_repository_extension"]}`, "application/json"},
			{"GET", "/v2/health/live", 200, `{"live":true}`, "application/json"},
			{"GET", "/v2/health/ready", 200, `{"ready":true}`, "application/json"},
			{"GET", "/v2/models/half_plus_two", 200, `{"name":"half_plus_two","versions":null,"platform":"",` + halfMeta, "application/json"},
			{"GET", "/v2/models/half_plus_two/versions/1", 501, `{"error":"Model versioning not supported yet."}`, "application/json"},
			{"GET", "/v2/models/half_plus_two/ready", 200, `{"name":"half_plus_two","ready":true}`, "application/json"},
			{"GET", "/v2/models/nope/ready", 404, `{"error":"Model with name nope does not exist."}`, "application/json"},
			{"GET", "/v2/models/half_plus_two/config", 404, `{"detail":"Not Found"}`, "application/json"},
			{"DELETE", "/v2", 405, `{"detail":"Method Not Allowed"}`, "application/json"},
			{"POST", "/v2/repository/index", 404, `{"detail":"Not Found"}`, "application/json"},
		},
		"mlserver": {
			{"GET", "/v2", 200, `{"name":"mlserver","version":"1.7.0","extensions":[]}`, "application/json"},
			{"GET", "/v2/health/ready", 200, "", ""},
			{"GET", "/v2/models/half_plus_two", 200, `{"name":"half_plus_two","versions":["1"],"platform":"",` + halfMeta, "application/json"},
			{"GET", "/v2/models/half_plus_two/versions/v9", 404, `{"error":"Model half_plus_two with version v9 not found"}`, "application/json"},
			{"GET", "/v2/models/nope/ready", 404, `{"error":"Model nope not found"}`, "application/json"},
			{"GET", "/nowhere", 404, `{"detail":"Not Found"}`, "application/json"},
		},
	}
	for kind, cases := range kinds {
		url := startServer(t, Options{Kind: kind})
		for _, c := range cases {
			t.Run(kind+" "+c.method+" "+c.path, func(t *testing.T) {
				r := call(t, c.method, url+c.path, nil)
				if r.status != c.status || string(r.body) != c.body {
					t.Errorf("got %d %q, want %d %q", r.status, r.body, c.status, c.body)
				}
				if got := r.header.Get("Content-Type"); got != c.ctype {
					t.Errorf("Content-Type %q, want %q", got, c.ctype)
				}
			})
		}
	}
}

func TestServerMetadataAndIndex(t *testing.T) {
	url := startServer(t, Options{Kind: "triton"})
	var meta struct {
		Name       string   `json:"name"`
		Extensions []string `json:"extensions"`
	}
	r := call(t, "GET", url+"/v2", nil)
	if err := json.Unmarshal(r.body, &meta); err != nil || meta.Name != "triton" || !slices.Contains(meta.Extensions, "binary_tensor_data") {
		t.Errorf("GET /v2: %d %s", r.status, r.body)
	}
	var index []struct{ Name, Version, State string }
	r = call(t, "POST", url+"/v2/repository/index", []byte(`{"ready":true}`))
	if err := json.Unmarshal(r.body, &index); err != nil || len(index) != len(Models()) || index[0].State != "READY" || index[0].Version != "1" {
		t.Errorf("index: %d %s", r.status, r.body)
	}
}

func TestHeaderDelay(t *testing.T) {
	url := startServer(t, Options{})
	start := time.Now()
	r := call(t, "GET", url+"/v2/health/ready", nil, HeaderDelay, "60ms")
	if r.status != 200 || time.Since(start) < 60*time.Millisecond {
		t.Errorf("status %d after %v", r.status, time.Since(start))
	}
	for _, bad := range []string{"soon", "-1s", "2h"} {
		r := call(t, "GET", url+"/v2/health/ready", nil, HeaderDelay, bad)
		if r.status != 400 || !strings.Contains(errorText(t, r), HeaderDelay) {
			t.Errorf("%s=%s: %d %s", HeaderDelay, bad, r.status, r.body)
		}
	}
}

// TestSlowGivesUpWithTheClient checks that model "slow" stops waiting when
// the client goes away instead of holding the handler for Options.Delay.
func TestSlowGivesUpWithTheClient(t *testing.T) {
	s, err := New(Options{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	started, done := make(chan struct{}), make(chan struct{})
	srv := newTrackedServer(t, s, started, done)
	// The client leaves once its request is being handled (a fixed client
	// timeout could pass before the request even arrived on a busy machine).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-started
		cancel()
	}()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv+"/v2/models/slow/infer",
		strings.NewReader(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]}`))
	if _, err := client.Do(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("want the client's cancel, got %v", err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second): // an hour if it does not give up; generous for a busy machine
		t.Fatal("the handler was still waiting 30s after the client left")
	}
}

func TestGarbage(t *testing.T) {
	body := []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[4],"data":[1,2,3,4]}],"parameters":{"binary_data_output":true}}`)
	for _, kind := range []string{"triton", "kserve", "mlserver"} {
		url := startServer(t, Options{Kind: kind})
		cases := []struct {
			mode  string
			check func(r response) string
		}{
			{"", func(r response) string {
				n, err := strconv.Atoi(r.header.Get("Inference-Header-Content-Length"))
				if kind == "mlserver" {
					if json.Valid(r.body) {
						return "the JSON body is still valid"
					}
					return ""
				}
				if err != nil || len(r.body)-n != 8 { // 16 bytes promised, 8 sent
					return "want the binary block cut in half"
				}
				return ""
			}},
			{"ihcl", func(r response) string {
				n, err := strconv.Atoi(r.header.Get("Inference-Header-Content-Length"))
				if err != nil || n <= len(r.body) {
					return "want an IHCL beyond the body"
				}
				return ""
			}},
			{"json", func(r response) string {
				if json.Valid(r.body) || r.header.Get("Inference-Header-Content-Length") != "" {
					return "want invalid JSON without IHCL"
				}
				return ""
			}},
			{"empty", func(r response) string {
				if len(r.body) != 0 {
					return "want an empty body"
				}
				return ""
			}},
		}
		for _, c := range cases {
			t.Run(kind+"/"+c.mode, func(t *testing.T) {
				r := call(t, "POST", url+"/v2/models/garbage/infer", body, "Content-Type", jsonCT, HeaderGarbage, c.mode)
				if r.status != 200 {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				if msg := c.check(r); msg != "" {
					t.Errorf("%s: %v %q", msg, r.header, r.body)
				}
			})
		}
		r := call(t, "POST", url+"/v2/models/garbage/infer", body, "Content-Type", jsonCT, HeaderGarbage, "fire")
		if r.status != 400 {
			t.Errorf("%s: unknown garbage mode answered %d", kind, r.status)
		}
	}
}

func TestBodyLimit(t *testing.T) {
	for _, kind := range []string{"triton", "kserve", "mlserver"} {
		url := startServer(t, Options{Kind: kind, MaxBodyBytes: 1000})
		big := bytes.Repeat([]byte(" "), 1001)
		r := call(t, "POST", url+"/v2/models/half_plus_two/infer", big, "Content-Type", jsonCT)
		if r.status != 413 {
			t.Errorf("%s: a 1001-byte body answered %d %s", kind, r.status, r.body)
		}
		ok := []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]}`)
		if r := call(t, "POST", url+"/v2/models/half_plus_two/infer", ok, "Content-Type", jsonCT); r.status != 200 {
			t.Errorf("%s: a small body answered %d %s", kind, r.status, r.body)
		}
	}
}
