package mockv2

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const noteBatch = "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be " +
	"prepended to each input shape. If you want to specify the full shape including the batch dim in your input " +
	"dims config, try setting max_batch_size to zero. See the model configuration docs for more info on max_batch_size."

func TestTritonErrors(t *testing.T) {
	url := startServer(t, Options{Kind: "triton"})
	x3 := `{"name":"x","datatype":"FP32","shape":[3],"data":[1,2,3]}`
	bin := func(header string, blobs ...[]byte) ([]byte, []string) {
		b, n := binaryBody(header, blobs...)
		return b, []string{"Inference-Header-Content-Length", n}
	}
	type tc struct {
		name   string
		method string
		path   string
		body   []byte
		hdr    []string
		status int
		err    string
	}
	cases := []tc{
		{name: "unknown model", path: "/v2/models/nope/infer", body: []byte(`{}`), status: 404,
			err: "Request for unknown model: 'nope' is not found"},
		{name: "unknown version", path: "/v2/models/simple/versions/2/infer", body: []byte(`{}`), status: 404,
			err: "Request for unknown model: 'simple' version 2 is not found"},
		{name: "version out of range", path: "/v2/models/simple/versions/99999999999999999999/infer", body: []byte(`{}`), status: 400,
			err: "failed to get model version from specified version string '99999999999999999999' (details: stol), version should be an integral value > 0"},
		{name: "non-numeric version is not a route", path: "/v2/models/simple/versions/v1/infer", body: []byte(`{}`), status: 404, err: "Not Found"},
		{name: "wrong method", method: "GET", path: "/v2/models/simple/infer", status: 405, err: "Method Not Allowed"},
		{name: "IHCL not a number", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[]}`),
			hdr: []string{"Inference-Header-Content-Length", "abc"}, status: 400,
			err: "Unable to parse Inference-Header-Content-Length, got: abc"},
		{name: "IHCL numeric prefix is read like stoi", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[]}`),
			hdr: []string{"Inference-Header-Content-Length", " 13xyz"}, status: 400,
			err: "[request id: <id_unknown>] expected 1 inputs but got 0 inputs for model 'half_plus_two'. Got input(s) [], but missing required input(s) ['x']. Please provide all required input(s)."},
		{name: "IHCL beyond the body", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[]}`),
			hdr: []string{"Inference-Header-Content-Length", "14"}, status: 400,
			err: "inference header size should be in range (0, 13), got: 14"},
		{name: "IHCL negative", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[]}`),
			hdr: []string{"Inference-Header-Content-Length", "-1"}, status: 400,
			err: "inference header size should be in range (0, 13), got: -1"},
		{name: "malformed JSON", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[}`), status: 500,
			err: "failed to parse the request JSON buffer: Invalid value. at 11"},
		{name: "binary without IHCL", path: "/v2/models/half_plus_two/infer",
			body: append([]byte(`{"inputs":[]}`), 0, 0, 0x80, 0x3f), status: 500,
			err: "failed to parse the request JSON buffer: The document root must not be followed by other values. at 13"},
		{name: "id not a string", path: "/v2/models/half_plus_two/infer", body: []byte(`{"id":5,"inputs":[` + x3 + `]}`), status: 500,
			err: "Unable to parse 'id': attempt to access JSON non-string as string"},
		{name: "reserved parameter", path: "/v2/models/half_plus_two/infer", body: []byte(`{"parameters":{"triton_x":1},"inputs":[` + x3 + `]}`), status: 400,
			err: "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."},
		{name: "parameter of invalid type", path: "/v2/models/half_plus_two/infer", body: []byte(`{"parameters":{"k":null},"inputs":[` + x3 + `]}`), status: 400,
			err: "parameter 'k' has invalid type. It should be either 'int', 'bool', or 'string'."},
		{name: "binary_data_output not a bool", path: "/v2/models/half_plus_two/infer", body: []byte(`{"parameters":{"binary_data_output":1},"inputs":[` + x3 + `]}`), status: 500,
			err: "Unable to parse 'binary_data_output': attempt to access JSON non-boolean as boolean"},
		{name: "no inputs member", path: "/v2/models/half_plus_two/infer", body: []byte(`{}`), status: 500,
			err: "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"},
		{name: "inputs not an array", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":{}}`), status: 500,
			err: "Unable to parse 'inputs': attempt to access JSON non-array as array"},
		{name: "no data at all", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]}`), status: 400,
			err: "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But no field is set"},
		{name: "no name", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]}`), status: 500,
			err: "Unable to parse 'name': attempt to access non-existing object member 'name'"},
		{name: "shape element not unsigned", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1.5],"data":[1]}]}`), status: 500,
			err: "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer"},
		{name: "float for INT32", path: "/v2/models/simple/infer", body: []byte(`{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,1],"data":[1.0]}]}`), status: 500,
			err: "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"},
		{name: "number for BOOL", path: "/v2/models/mixed_types/infer", body: []byte(`{"inputs":[{"name":"flag","datatype":"BOOL","shape":[1,1],"data":[1]}]}`), status: 500,
			err: "Unable to parse 'data': attempt to access JSON non-boolean as boolean"},
		{name: "string for FP32", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":["1"]}]}`), status: 500,
			err: "Unable to parse 'data': attempt to access JSON non-number as double"},
		{name: "number for BYTES", path: "/v2/models/bytes_echo/infer", body: []byte(`{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"data":[1]}]}`), status: 500,
			err: "Unable to parse JSON bytes array: attempt to access JSON non-string as string"},
		{name: "data not an array", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":1}]}`), status: 500,
			err: "Unable to parse 'data': attempt to access JSON non-array as array"},
		{name: "data too short", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":[1,2]}]}`), status: 500,
			err: "Failed to parse 'data' field: shape does not match true shape"},
		{name: "huge shape, little data", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[4000000000000],"data":[1]}]}`), status: 500,
			err: "Failed to parse 'data' field: shape does not match true shape"},
		{name: "FP16 via JSON", path: "/v2/models/half_times_two/infer", body: []byte(`{"inputs":[{"name":"x","datatype":"FP16","shape":[1,4],"data":[1,2,3,4]}]}`), status: 400,
			err: "receiving FP16 data via JSON is not supported. Please use the binary data format for input x"},
		{name: "unknown datatype via JSON", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[{"name":"x","datatype":"FLOAT","shape":[1],"data":[1]}]}`), status: 400,
			err: "invalid datatype for input x"},
		{name: "missing input", path: "/v2/models/simple/infer", body: []byte(`{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[0,16],"data":[]}]}`), status: 400,
			err: "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'simple'. Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all required input(s)."},
		// Without a batch dimension dim 0 is taken as the batch: a [16]
		// fails the batch-size check before the shape check...
		{name: "no batch dimension, too large as a batch", path: "/v2/models/simple/infer", body: []byte(`{"id":"r1","inputs":[` +
			`{"name":"INPUT0","datatype":"INT32","shape":[16],"data":` + i32json(seq32(0, 16)) + `},` +
			`{"name":"INPUT1","datatype":"INT32","shape":[16],"data":` + i32json(seq32(0, 16)) + `}]}`), status: 400,
			err: "[request id: r1] inference request batch-size must be <= 8 for 'simple'"},
		// ...and a [4] reaches it.
		{name: "no batch dimension", path: "/v2/models/simple/infer", body: []byte(`{"id":"r1","inputs":[` +
			`{"name":"INPUT0","datatype":"INT32","shape":[4],"data":[1,2,3,4]},` +
			`{"name":"INPUT1","datatype":"INT32","shape":[4],"data":[1,2,3,4]}]}`), status: 400,
			err: "[request id: r1] unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [4]. " + noteBatch},
		{name: "rank mismatch keeps the trailing space", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[],"data":[]}]}`), status: 400,
			err: "[request id: <id_unknown>] unexpected shape for input 'x' for model 'half_plus_two'. Expected [-1], got []. "},
		{name: "empty shape on a batching model", path: "/v2/models/identity_int64/infer", body: []byte(`{"inputs":[{"name":"INPUT0","datatype":"INT64","shape":[],"data":[]}]}`), status: 400,
			err: "[request id: <id_unknown>] input 'INPUT0' has no shape but model requires batch dimension for 'identity_int64'"},
		{name: "unknown input", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[{"name":"z","datatype":"FP32","shape":[1],"data":[1]}]}`), status: 400,
			err: "unexpected inference input 'z' for model 'half_plus_two'"},
		{name: "duplicate input", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[` + x3 + `,` + x3 + `]}`), status: 400,
			err: "[request id: <id_unknown>] input 'x' already exists in request"},
		{name: "unknown output", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[` + x3 + `],"outputs":[{"name":"nope"}]}`), status: 400,
			err: "unexpected inference output 'nope' for model 'half_plus_two'"},
		{name: "duplicate output", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[` + x3 + `],"outputs":[{"name":"y"},{"name":"y"}]}`), status: 400,
			err: "output 'y' already exists in request"},
		{name: "binary_data not a bool", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[` + x3 + `],"outputs":[{"name":"y","parameters":{"binary_data":"yes"}}]}`), status: 500,
			err: "Unable to parse 'binary_data': attempt to access JSON non-boolean as boolean"},
		{name: "classification", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[` + x3 + `],"outputs":[{"name":"y","parameters":{"classification":2}}]}`), status: 501,
			err: "mock: the classification extension is not implemented"},
		{name: "shared memory", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":{"shared_memory_region":"r"}}]}`), status: 400,
			err: "Unable to find shared memory region: 'r'"},
		{name: "unsupported Content-Encoding", path: "/v2/models/half_plus_two/infer", body: []byte(`{}`),
			hdr: []string{"Content-Encoding", "br"}, status: 501, err: "Unsupported compression type"},
		{name: "FP16 output as JSON", path: "/v2/models/half_times_two/infer", status: 400,
			err: "sending FP16 data via JSON is not supported. Please use the binary data format for output"},
		{name: "datatype mismatch", path: "/v2/models/half_plus_two/infer", status: 400,
			err: "[request id: <id_unknown>] inference input 'x' data-type is 'INT32', but model 'half_plus_two' expects 'FP32'"},
		{name: "byte size mismatch", path: "/v2/models/half_plus_two/infer", status: 400,
			err: "[request id: <id_unknown>] input byte size mismatch for input 'x' for model 'half_plus_two'. Expected 12, got 8"},
		{name: "binary too short", path: "/v2/models/half_plus_two/infer", status: 400,
			err: "unexpected size for input 'x', expecting 4 additional bytes for model 'half_plus_two'"},
		{name: "leftover binary", path: "/v2/models/half_plus_two/infer", status: 400,
			err: "unexpected additional input data for model 'half_plus_two'"},
		{name: "too few strings", path: "/v2/models/bytes_echo/infer", status: 400,
			err: "[request id: <id_unknown>] expected 3 string elements for inference input 'text' for model 'bytes_echo', got 2"},
		{name: "too many strings", path: "/v2/models/bytes_echo/infer", status: 400,
			err: "[request id: <id_unknown>] unexpected number of string elements 2 for inference input 'text' for model 'bytes_echo', expecting 1"},
		{name: "split length indicator", path: "/v2/models/bytes_echo/infer", status: 400,
			err: "[request id: <id_unknown>] incomplete string length indicator for inference input 'text' for model 'bytes_echo', expecting 4 bytes but only 2 bytes available. Please make sure the string length indicator is in one buffer."},
		{name: "batch too large", path: "/v2/models/simple/infer", status: 400,
			err: "[request id: <id_unknown>] inference request batch-size must be <= 8 for 'simple'"},
	}
	// Binary bodies for the cases above that need them.
	binaries := map[string]func() ([]byte, []string){
		"FP16 output as JSON": func() ([]byte, []string) {
			return bin(`{"inputs":[{"name":"x","datatype":"FP16","shape":[1,4],"parameters":{"binary_data_size":8}}]}`, f16le(1, 2, 3, 4))
		},
		"datatype mismatch": func() ([]byte, []string) {
			return bin(`{"inputs":[{"name":"x","datatype":"INT32","shape":[3],"parameters":{"binary_data_size":12}}]}`, i32le(1, 2, 3))
		},
		"byte size mismatch": func() ([]byte, []string) {
			return bin(`{"inputs":[{"name":"x","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":8}}]}`, f32le(1, 2))
		},
		"binary too short": func() ([]byte, []string) {
			return bin(`{"inputs":[{"name":"x","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`, f32le(1, 2))
		},
		"leftover binary": func() ([]byte, []string) {
			return bin(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}}]}`, f32le(1, 2))
		},
		"too few strings": func() ([]byte, []string) {
			return bin(`{"inputs":[{"name":"text","datatype":"BYTES","shape":[3],"parameters":{"binary_data_size":10}}]}`, strsLE("a", "b"))
		},
		"too many strings": func() ([]byte, []string) {
			return bin(`{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":10}}]}`, strsLE("a", "b"))
		},
		"split length indicator": func() ([]byte, []string) {
			return bin(`{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":2}}]}`, []byte{1, 0})
		},
		"batch too large": func() ([]byte, []string) {
			data := i32le(make([]int32, 9*16)...)
			return bin(`{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[9,16],"parameters":{"binary_data_size":576}},`+
				`{"name":"INPUT1","datatype":"INT32","shape":[9,16],"parameters":{"binary_data_size":576}}]}`, data, data)
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if mk, ok := binaries[c.name]; ok {
				c.body, c.hdr = mk()
			}
			method := c.method
			if method == "" {
				method = "POST"
			}
			r := call(t, method, url+c.path, c.body, c.hdr...)
			if r.status != c.status {
				t.Errorf("status %d, want %d (%s)", r.status, c.status, r.body)
			}
			if got := errorText(t, r); got != c.err {
				t.Errorf("error\n got %q\nwant %q", got, c.err)
			}
		})
	}
}

func TestTritonResponses(t *testing.T) {
	url := startServer(t, Options{Kind: "triton"})
	x := `{"name":"x","datatype":"FP32","shape":[3],"data":[1,2,5]}`
	cases := []struct {
		name   string
		path   string
		body   string
		hdr    []string
		want   string // the exact body
		ctype  string
		noIHCL bool
	}{
		{name: "id echoed first, JSON outputs", path: "/v2/models/half_plus_two/infer",
			body:  `{"id":"abc","inputs":[` + x + `]}`,
			want:  `{"id":"abc","model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[2.5,3.0,4.5]}]}`,
			ctype: "application/json", noIHCL: true},
		{name: "empty id not echoed", path: "/v2/models/half_plus_two/infer",
			body:  `{"id":"","inputs":[` + x + `]}`,
			want:  `{"model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[2.5,3.0,4.5]}]}`,
			ctype: "application/json", noIHCL: true},
		{name: "NaN and infinities in and out", path: "/v2/models/half_plus_two/infer",
			body:  `{"inputs":[{"name":"x","datatype":"FP32","shape":[4],"data":[NaN,Infinity,-Infinity,-Inf]}]}`,
			want:  `{"model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[4],"data":[NaN,Infinity,-Infinity,-Infinity]}]}`,
			ctype: "application/json", noIHCL: true},
		{name: "rapidjson float layout", path: "/v2/models/fixed3/infer",
			body:  `{"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":[1e-7,1e21,0.1]}]}`,
			want:  `{"model_name":"fixed3","model_version":"1","outputs":[{"name":"reversed","datatype":"FP32","shape":[3],"data":[0.10000000149011612,1.0000000200408773e21,1.0000000116860974e-7]},{"name":"total","datatype":"FP32","shape":[1],"data":[1.0000000200408773e21]}]}`,
			ctype: "application/json", noIHCL: true},
		{name: "zero-size binary output stays JSON", path: "/v2/models/half_plus_two/infer",
			body:  `{"inputs":[{"name":"x","datatype":"FP32","shape":[0],"data":[]}],"parameters":{"binary_data_output":true}}`,
			want:  `{"model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[0],"parameters":{"binary_data_size":0}}]}`,
			ctype: "application/json", noIHCL: true},
		{name: "listed output with binary_data", path: "/v2/models/multi_out/infer",
			body: `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1,2]}],"outputs":[{"name":"argmax","parameters":{"binary_data":true}},{"name":"label_bytes"}]}`,
			want: `{"model_name":"multi_out","model_version":"1","outputs":[{"name":"argmax","datatype":"INT64","shape":[1],"parameters":{"binary_data_size":8}},{"name":"label_bytes","datatype":"BYTES","shape":[1],"data":["second"]}]}` +
				"\x01\x00\x00\x00\x00\x00\x00\x00",
			ctype: "application/octet-stream"},
		{name: "empty outputs list means all, binary_data_output applies", path: "/v2/models/half_plus_two/infer",
			body:  `{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[2]}],"outputs":[],"parameters":{"binary_data_output":true}}`,
			want:  `{"model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}}]}` + string(f32le(3)),
			ctype: "application/octet-stream"},
		{name: "BYTES written raw, escaped like rapidjson", path: "/v2/models/bytes_echo/infer",
			body:  `{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"data":["a\u0001\"/é"]}],"outputs":[{"name":"echo"}]}`,
			want:  `{"model_name":"bytes_echo","model_version":"1","outputs":[{"name":"echo","datatype":"BYTES","shape":[1],"data":["a\u0001\"/é"]}]}`,
			ctype: "application/json", noIHCL: true},
		{name: "Content-Type is ignored", path: "/v2/models/half_plus_two/infer",
			body: `{"inputs":[` + x + `]}`, hdr: []string{"Content-Type", "image/png"},
			want:  `{"model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[2.5,3.0,4.5]}]}`,
			ctype: "application/json", noIHCL: true},
		{name: "version 1 answers", path: "/v2/models/half_plus_two/versions/1/infer",
			body:  `{"inputs":[` + x + `]}`,
			want:  `{"model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[2.5,3.0,4.5]}]}`,
			ctype: "application/json", noIHCL: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, "POST", url+c.path, []byte(c.body), c.hdr...)
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if string(r.body) != c.want {
				t.Errorf("body\n got %q\nwant %q", r.body, c.want)
			}
			if ct := r.header.Get("Content-Type"); ct != c.ctype {
				t.Errorf("Content-Type %q, want %q", ct, c.ctype)
			}
			ihcl := r.header.Get("Inference-Header-Content-Length")
			if c.noIHCL != (ihcl == "") {
				t.Errorf("IHCL %q", ihcl)
			}
			if !c.noIHCL && ihcl != "" {
				if want := strings.LastIndex(c.want, "]}") + 2; ihcl != strconv.Itoa(want) {
					t.Errorf("IHCL %s, want %d", ihcl, want)
				}
			}
		})
	}
}

func inflate(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTritonRawRequests covers Inference-Header-Content-Length: 0.
func TestTritonRawRequests(t *testing.T) {
	url := startServer(t, Options{Kind: "triton"})
	cases := []struct {
		model  string
		body   []byte
		status int
		shape  []int64
		values []string
		err    string
	}{
		{model: "half_plus_two", body: f32le(1, 2, 5), status: 200, shape: []int64{3}, values: f32s(2.5, 3, 4.5)},
		{model: "identity_int64", body: i64le(7, -8), status: 200, shape: []int64{1, 2}, values: ints(7, -8)},
		{model: "multi_out", body: f32le(1, 2, 4, 3), status: 200, shape: []int64{2}, values: fl(3, 7)},
		{model: "simple", body: i32le(1), status: 400,
			err: "[request id: <id_unknown>] Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'simple' model configuration"},
		{model: "bytes_echo", body: []byte("427"), status: 400,
			err: "[request id: <id_unknown>] For BYTE datatype raw input 'text', the model must have input shape [1]"},
		{model: "fixed3", body: f32le(1, 2), status: 400,
			err: "[request id: <id_unknown>] input byte size mismatch for input 'x' for model 'fixed3'. Expected 12, got 8"},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			r := call(t, "POST", url+"/v2/models/"+c.model+"/infer", c.body, "Inference-Header-Content-Length", "0")
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if c.status != 200 {
				if got := errorText(t, r); got != c.err {
					t.Errorf("error\n got %q\nwant %q", got, c.err)
				}
				return
			}
			_, outs := decodeV2(t, r)
			if !outs[0].Binary || !slices.Equal(outs[0].Shape, c.shape) || !slices.Equal(outs[0].Values, c.values) {
				t.Errorf("first output %+v, want binary %v %v", outs[0], c.shape, c.values)
			}
			for _, o := range outs {
				if !o.Binary {
					t.Errorf("output %s not binary", o.Name)
				}
			}
		})
	}
}

func TestTritonCompression(t *testing.T) {
	url := startServer(t, Options{Kind: "triton"})
	req := []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[2,4]}],"parameters":{"binary_data_output":true}}`)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(req)
	_ = zw.Close()
	cases := []struct {
		name, encoding, accept, wantEncoding string
	}{
		{"identity both ways", "", "identity", ""},
		{"gzip request body", "gzip", "", ""},
		{"gzip response", "", "gzip, deflate, br", "gzip"},
		{"deflate preferred by q", "", "gzip;q=0.5, deflate", "deflate"},
		{"identity preferred by q", "", "gzip;q=0.1, identity", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := req
			hdr := []string{"Accept-Encoding", c.accept}
			if c.encoding != "" {
				body = gz.Bytes()
				hdr = append(hdr, "Content-Encoding", c.encoding)
			}
			r := call(t, "POST", url+"/v2/models/half_plus_two/infer", body, hdr...)
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if got := r.header.Get("Content-Encoding"); got != c.wantEncoding {
				t.Fatalf("Content-Encoding %q, want %q", got, c.wantEncoding)
			}
			switch c.wantEncoding {
			case "gzip":
				zr, err := gzip.NewReader(bytes.NewReader(r.body))
				if err != nil {
					t.Fatal(err)
				}
				r.body, _ = io.ReadAll(zr)
			case "deflate":
				r.body = inflate(t, r.body)
			}
			// The IHCL counts the uncompressed JSON.
			_, outs := decodeV2(t, r)
			if !slices.Equal(outs[0].Values, fl(3, 4)) {
				t.Errorf("y = %v", outs[0].Values)
			}
		})
	}
}

func TestTritonIHCLHeaderCase(t *testing.T) {
	url := startServer(t, Options{Kind: "triton"})
	body, n := binaryBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}}]}`, f32le(4))
	req, _ := http.NewRequest("POST", url+"/v2/models/half_plus_two/infer", bytes.NewReader(body))
	req.Header["inference-header-content-length"] = []string{n} // sent lowercase on the wire
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"data":[4.0]`) {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
}
