package backend

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// answerTransport answers every control call from memory: GET /v2 with
// kind, model metadata with meta, Triton's /config with config, all with
// status. It never dials, so a fuzz run makes no network calls.
type answerTransport struct {
	status             int
	kind, meta, config []byte
}

func (a answerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body := a.meta
	switch {
	case req.URL.Path == "/v2":
		body = a.kind
	case strings.HasSuffix(req.URL.Path, "/config"):
		body = a.config
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if a.status >= 300 && a.status < 400 {
		h.Set("Location", "http://elsewhere.invalid/x")
	}
	return &http.Response{StatusCode: a.status, Header: h, Body: io.NopCloser(strings.NewReader(string(body))),
		ContentLength: int64(len(body)), Request: req}, nil
}

// FuzzSignatureAnswers drives the whole metadata client (kind detection,
// model metadata, Triton's /config) with arbitrary statuses and bodies: it
// never panics, every failure is an *apierr.Error that names neither the
// server's address nor a redirect target, a 3xx is always a 502, only a
// 404 is a NOT_FOUND, and an accepted signature is well formed with
// Batched exactly when Triton's max_batch_size is positive.
func FuzzSignatureAnswers(f *testing.F) {
	meta := `{"name":"simple","versions":["1"],"platform":"onnxruntime_onnx","inputs":[{"name":"INPUT0","datatype":"INT32","shape":[-1,16]}],"outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[-1,16]}]}`
	kind := `{"name":"triton","version":"2.50.0","extensions":["binary_tensor_data"]}`
	f.Add(200, []byte(kind), []byte(meta), []byte(`{"name":"simple","max_batch_size":8}`))
	f.Add(200, []byte(kind), []byte(meta), []byte(`{"max_batch_size":"0"}`))
	f.Add(200, []byte(kind), []byte(meta), []byte(`{"max_batch_size":-1}`))
	f.Add(200, []byte(kind), []byte(meta), []byte(`{"max_batch_size":2147483648}`))
	f.Add(200, []byte(`{"name":"mlserver","version":"1.7","extensions":[]}`), []byte(meta), []byte(`nope`))
	f.Add(200, []byte(`{"name":"kserve"}`), []byte(`{"name":"m","versions":null,"inputs":[],"outputs":[]}`), []byte(``))
	f.Add(302, []byte(kind), []byte(meta), []byte(`{}`))
	f.Add(404, []byte(kind), []byte(`{"error":"Request for unknown model: 'm' is not found"}`), []byte(`{}`))
	f.Add(500, []byte(`{"detail":[{"msg":"x"}]}`), []byte(`Internal Server Error`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, status int, kindBody, metaBody, configBody []byte) {
		if status < 100 || status > 999 {
			status = 200 + int(uint(status)%800)
		}
		c, err := New(Config{BaseURL: "http://v2.internal.example:8000", Kind: "auto", Timeout: time.Second,
			ErrorTTL: -1, Transport: answerTransport{status: status, kind: kindBody, meta: metaBody, config: configBody}})
		if err != nil {
			t.Fatal(err)
		}
		sig, err := c.Signature(context.Background(), model("m"))
		if err != nil {
			var e *apierr.Error
			if !errors.As(err, &e) || e.Msg == "" {
				t.Fatalf("error %T %v is not an *apierr.Error", err, err)
			}
			bodies := string(kindBody) + string(metaBody) + string(configBody)
			for _, addr := range []string{"v2.internal.example", "elsewhere.invalid"} {
				// The server's own messages are shown; our words never
				// name an address.
				if strings.Contains(e.Msg, addr) && !strings.Contains(bodies, addr) {
					t.Fatalf("message %q leaks an address", e.Msg)
				}
			}
			if status >= 300 && status < 400 && e.Code != apierr.BadGateway {
				t.Fatalf("status %d gave %v; want BAD_GATEWAY", status, e)
			}
			if e.Code == apierr.NotFound && status != http.StatusNotFound {
				t.Fatalf("status %d gave NOT_FOUND: %v", status, e)
			}
			return
		}
		if status != http.StatusOK {
			t.Fatalf("status %d accepted", status)
		}
		for _, specs := range [][]tensor.Spec{sig.Inputs, sig.Outputs} {
			for _, s := range specs {
				if s.Name == "" || !s.DataType.Valid() {
					t.Fatalf("accepted spec %+v", s)
				}
			}
		}
		k, err := c.Kind(context.Background())
		if err != nil {
			t.Fatalf("a signature without a server kind: %v", err)
		}
		if k.String() == "triton" {
			if sig.MaxBatchSize < 0 || sig.MaxBatchSize > math.MaxInt32 || sig.Batched != (sig.MaxBatchSize > 0) {
				t.Fatalf("Triton signature: max_batch_size %d, batched %v (config %q)", sig.MaxBatchSize, sig.Batched, configBody)
			}
		}
		if sig.Model == "" {
			t.Fatalf("signature without a model name (metadata %s)", strconv.Quote(string(metaBody)))
		}
	})
}
