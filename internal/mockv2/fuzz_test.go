package mockv2

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// FuzzInfer throws arbitrary bodies and headers at every kind and model:
// the server must never panic, must answer one of the statuses the real
// servers use, and a 200 must be internally consistent.
func FuzzInfer(f *testing.F) {
	f.Add(uint8(0), uint8(0), []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":[1,2,NaN]}]}`), "")
	f.Add(uint8(1), uint8(1), []byte(`{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[[1,2,3,4,5,6,7,8],[9,10,11,12,13,14,15,16]]}]}`), "")
	f.Add(uint8(2), uint8(2), []byte(`{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":7}}]}`+"\x03\x00\x00\x00abc"), "98")
	f.Add(uint8(3), uint8(0), []byte(`{"inputs":[{"name":"x","datatype":"FP16","shape":[1,4],"parameters":{"binary_data_size":8}}],"parameters":{"binary_data_output":true}}`+"\x00<\x00<\x00<\x00<"), "123")
	f.Add(uint8(5), uint8(1), []byte(`{"inputs":[{"name":"flag","datatype":"BOOL","shape":[1,1],"data":[true]},{"name":"count","datatype":"INT64","shape":[1,1],"data":[1]},{"name":"value","datatype":"FP64","shape":[1,1],"data":[1]}]}`), "")
	f.Add(uint8(7), uint8(0), []byte("\x01\x00\x00\x00\x00\x00\x00\x00"), "0")
	f.Add(uint8(0), uint8(1), []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[-1],"data":[[1],[2,3]]}]}`), "")
	f.Add(uint8(0), uint8(2), []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[4000000000000000000,4],"data":[1]}]}`), "")
	servers := make([]*Server, 3)
	for i, k := range []string{"triton", "kserve", "mlserver"} {
		s, err := New(Options{Kind: k, Delay: time.Nanosecond, MaxBodyBytes: 1 << 20})
		if err != nil {
			f.Fatal(err)
		}
		servers[i] = s
	}
	models := []string{"half_plus_two", "simple", "bytes_echo", "half_times_two", "multi_out", "mixed_types",
		"fixed3", "identity_int64", "FP16OutputModel", "FP16InputModel", "slow"}
	allowed := map[int]bool{200: true, 400: true, 404: true, 413: true, 422: true, 500: true, 501: true}
	f.Fuzz(func(t *testing.T, model, kind uint8, body []byte, ihcl string) {
		s := servers[int(kind)%len(servers)]
		req := httptest.NewRequest("POST", "/v2/models/"+models[int(model)%len(models)]+"/infer", bytes.NewReader(body))
		if ihcl != "" {
			req.Header.Set("Inference-Header-Content-Length", ihcl)
			req.Header.Set("Content-Type", "application/octet-stream")
		} else {
			req.Header.Set("Content-Type", "application/json")
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if !allowed[w.Code] {
			t.Fatalf("status %d: %s", w.Code, w.Body.Bytes())
		}
		if w.Code != http.StatusOK {
			return
		}
		out := w.Result().Header.Get("Inference-Header-Content-Length")
		if out == "" {
			return
		}
		n, err := strconv.Atoi(out)
		if err != nil || n > w.Body.Len() {
			t.Fatalf("IHCL %q for a %d-byte body", out, w.Body.Len())
		}
		if !bytes.Contains(w.Body.Bytes()[:n], []byte("NaN")) && !bytes.Contains(w.Body.Bytes()[:n], []byte("Infinity")) {
			decodeV2(t, response{status: w.Code, header: w.Result().Header, body: w.Body.Bytes()})
		}
	})
}
