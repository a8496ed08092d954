package mockv2

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// pyCase is one request to a Python server and the answer expected: an
// exact {"error"} text, or a FastAPI detail list, or a plain-text body.
type pyCase struct {
	name   string
	path   string
	body   []byte
	hdr    []string
	status int
	err    string // {"error": err}
	detail string // the exact {"detail": ...} JSON
	text   string // a plain-text body
}

func runPyCases(t *testing.T, url string, cases []pyCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, "POST", url+c.path, c.body, c.hdr...)
			if r.status != c.status {
				t.Errorf("status %d, want %d (%s)", r.status, c.status, r.body)
			}
			switch {
			case c.err != "":
				if got := errorText(t, r); got != c.err {
					t.Errorf("error\n got %q\nwant %q", got, c.err)
				}
			case c.detail != "":
				if string(r.body) != `{"detail":`+c.detail+`}` {
					t.Errorf("body\n got %s\nwant {\"detail\":%s}", r.body, c.detail)
				}
			default:
				if string(r.body) != c.text || r.header.Get("Content-Type") != "text/plain; charset=utf-8" {
					t.Errorf("body %q (%s), want plain %q", r.body, r.header.Get("Content-Type"), c.text)
				}
			}
		})
	}
}

const jsonCT = "application/json"

func TestKServeErrors(t *testing.T) {
	url := startServer(t, Options{Kind: "kserve"})
	octet := func(header string, blobs ...[]byte) ([]byte, []string) {
		b, n := binaryBody(header, blobs...)
		return b, []string{"Content-Type", "application/octet-stream", "inference-header-content-length", n}
	}
	x := `{"name":"x","datatype":"FP32","shape":[3],"data":[1,2,3]}`
	nonUTF8, nonUTF8Hdr := octet(`{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]}`,
		strsLE("\xff\xfe"))
	bf16, bf16Hdr := octet(`{"inputs":[{"name":"x","datatype":"BF16","shape":[1],"parameters":{"binary_data_size":2}}]}`, []byte{0x80, 0x3f})
	noData, noDataHdr := octet(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]}`)
	fp16JSON, fp16JSONHdr := octet(`{"inputs":[{"name":"x","datatype":"FP16","shape":[1,4],"data":[1,2,3,4]}]}`)
	short, shortHdr := octet(`{"inputs":[{"name":"x","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`, f32le(1, 2))
	cases := []pyCase{
		{name: "unknown model", path: "/v2/models/nope/infer", body: []byte(`{"inputs":[]}`), hdr: []string{"Content-Type", jsonCT},
			status: 404, err: "Model with name nope does not exist."},
		{name: "versioned path", path: "/v2/models/simple/versions/1/infer", body: []byte(`{"inputs":[]}`), hdr: []string{"Content-Type", jsonCT},
			status: 501, err: "Model versioning not supported yet."},
		{name: "binary body sent as JSON", path: "/v2/models/half_plus_two/infer", body: []byte("{\"inputs\":[]}\x00\x00"),
			hdr: []string{"Content-Type", jsonCT}, status: 422,
			detail: `[{"type":"json_invalid","loc":["body",13],"msg":"JSON decode error","input":{},"ctx":{"error":"Extra data"}}]`},
		{name: "body fails validation before the model is looked up", path: "/v2/models/nope/infer", body: []byte(`{"id":1,"inputs":[{"name":"x","shape":"3","datatype":"FP32","data":"abc"}]}`),
			hdr: []string{"Content-Type", jsonCT}, status: 422,
			detail: `[{"type":"string_type","loc":["body","id"],"msg":"Input should be a valid string","input":1},` +
				`{"type":"list_type","loc":["body","inputs",0,"shape"],"msg":"Input should be a valid list","input":"3"},` +
				`{"type":"list_type","loc":["body","inputs",0,"data"],"msg":"Input should be a valid list","input":"abc"}]`},
		{name: "missing inputs", path: "/v2/models/simple/infer", body: []byte(`{}`), hdr: []string{"Content-Type", jsonCT}, status: 422,
			detail: `[{"type":"missing","loc":["body","inputs"],"msg":"Field required","input":{}}]`},
		{name: "IHCL missing", path: "/v2/models/half_plus_two/infer", body: []byte("xx"), hdr: []string{"Content-Type", "application/octet-stream"},
			status: 400, err: "received byte inputs, but the'inference-header-content-length' header is missing."},
		{name: "IHCL not an integer", path: "/v2/models/half_plus_two/infer", body: []byte("xx"),
			hdr:    []string{"Content-Type", "application/octet-stream", "Inference-Header-Content-Length", "abc"},
			status: 500, err: "ValueError : invalid literal for int() with base 10: 'abc'"},
		{name: "JSON header unparsable", path: "/v2/models/half_plus_two/infer", body: []byte("{\"inputs\":[x]}"),
			hdr:    []string{"Content-Type", "application/octet-stream", "Inference-Header-Content-Length", "14"},
			status: 400, err: "Unrecognized request format: unexpected character: line 1 column 12 (char 11)"},
		{name: "no data and no binary_data_size", path: "/v2/models/half_plus_two/infer", body: noData, hdr: noDataHdr,
			status: 400, err: "'data' field is missing for input 'x' for model 'half_plus_two'"},
		{name: "FP16 JSON data in a binary request", path: "/v2/models/half_times_two/infer", body: fp16JSON, hdr: fp16JSONHdr,
			status: 400, err: "Receiving FP16 data via JSON is not supported. Please use the binary data format for input x"},
		{name: "FP16 JSON data in a JSON request", path: "/v2/models/half_times_two/infer",
			body: []byte(`{"inputs":[{"name":"x","datatype":"FP16","shape":[1,4],"data":[1,2,3,4]}]}`), hdr: []string{"Content-Type", jsonCT},
			status: 400, err: "Sending FP16 data via JSON is not supported. Please use the binary data format for input x"},
		{name: "BYTES must be UTF-8", path: "/v2/models/bytes_echo/infer", body: nonUTF8, hdr: nonUTF8Hdr,
			status: 500, err: `Failed to encode "b'\xff\xfe'" using UTF-8. Please use binary_data=True, if you want to pass a byte array.`},
		{name: "BF16 unsupported", path: "/v2/models/half_plus_two/infer", body: bf16, hdr: bf16Hdr,
			status: 400, err: "invalid datatype None in the input"},
		{name: "short binary block fails the reshape", path: "/v2/models/half_plus_two/infer", body: short, hdr: shortHdr,
			status: 500, err: "ValueError : cannot reshape array of size 2 into shape (3,)"},
		{name: "wrong element count", path: "/v2/models/simple/infer", hdr: []string{"Content-Type", jsonCT},
			body:   []byte(`{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[1,2]}]}`),
			status: 500, err: "ValueError : cannot reshape array of size 2 into shape (1,16)"},
		{name: "ragged data", path: "/v2/models/multi_out/infer", hdr: []string{"Content-Type", jsonCT},
			body:   []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[2,2],"data":[[1,2],[3]]}]}`),
			status: 500, err: "ValueError : setting an array element with a sequence. The requested array has an inhomogeneous shape after 1 dimensions. The detected shape was (2,) + inhomogeneous part."},
		{name: "integer out of range", path: "/v2/models/simple/infer", hdr: []string{"Content-Type", jsonCT},
			body:   []byte(`{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,1],"data":[3000000000]}]}`),
			status: 500, err: "OverflowError : Python integer 3000000000 out of bounds for int32"},
		{name: "unknown input", path: "/v2/models/half_plus_two/infer", hdr: []string{"Content-Type", jsonCT},
			body:   []byte(`{"inputs":[{"name":"z","datatype":"FP32","shape":[1],"data":[1]}]}`),
			status: 400, err: "unexpected inference input 'z' for model 'half_plus_two'"},
		{name: "unknown requested output", path: "/v2/models/half_plus_two/infer", hdr: []string{"Content-Type", jsonCT},
			body:   []byte(`{"inputs":[` + x + `],"outputs":[{"name":"nope"}]}`),
			status: 400, err: "Unexpected inference output 'nope' for model 'half_plus_two'"},
		{name: "FP16 output as JSON", path: "/v2/models/FP16OutputModel/infer", hdr: []string{"Content-Type", jsonCT},
			body:   []byte(`{"inputs":[{"name":"fp32_input","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`),
			status: 400, err: "Sending FP16 data via JSON is not supported. Please use the binary data format for output fp16_output"},
		{name: "non-UTF-8 output as JSON", path: "/v2/models/bytes_echo/infer", hdr: []string{"Content-Type", jsonCT},
			body:   []byte(`{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"data":["é"]}]}`),
			status: 500, err: `Failed to encode "b'\xa9\xc3'" using UTF-8. Please use binary_data=True, if you want to pass a byte array.`},
	}
	runPyCases(t, url, cases)
}

func TestKServeResponses(t *testing.T) {
	url := startServer(t, Options{Kind: "kserve"})
	x := `{"name":"x","datatype":"fp32","shape":[2],"data":[2,4]}` // KServe upper-cases datatypes
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	t.Run("generated id and nulls", func(t *testing.T) {
		r := call(t, "POST", url+"/v2/models/half_plus_two/infer", []byte(`{"inputs":[`+x+`]}`), "Content-Type", jsonCT)
		var doc map[string]any
		if err := json.Unmarshal(r.body, &doc); err != nil {
			t.Fatalf("%d %s", r.status, r.body)
		}
		id, _ := doc["id"].(string)
		if !uuid.MatchString(id) {
			t.Errorf("id %q is not a UUID4", id)
		}
		want := `{"model_name":"half_plus_two","model_version":null,"id":"` + id +
			`","parameters":null,"outputs":[{"name":"y","shape":[2],"datatype":"FP32","parameters":null,"data":[3.0,4.0]}]}`
		if string(r.body) != want {
			t.Errorf("body\n got %s\nwant %s", r.body, want)
		}
	})
	t.Run("binary_data_output by truthiness, no Content-Type", func(t *testing.T) {
		r := call(t, "POST", url+"/v2/models/half_plus_two/infer",
			[]byte(`{"id":"7","inputs":[`+x+`],"parameters":{"binary_data_output":1}}`), "Content-Type", jsonCT)
		want := `{"id":"7","model_name":"half_plus_two","model_version":null,"outputs":[{"name":"y","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}]}`
		if string(r.body) != want+string(f32le(3, 4)) || r.header.Get("Inference-Header-Content-Length") != strconv.Itoa(len(want)) {
			t.Errorf("%d %v %q", r.status, r.header, r.body)
		}
		if _, ok := r.header["Content-Type"]; ok {
			t.Errorf("Content-Type %q, want none", r.header.Get("Content-Type"))
		}
		if len(r.header["Content-Length"]) != 0 {
			t.Errorf("Content-Length %q, want a chunked body", r.header["Content-Length"])
		}
	})
	t.Run("listed outputs without binary_data are JSON", func(t *testing.T) {
		r := call(t, "POST", url+"/v2/models/multi_out/infer",
			[]byte(`{"id":"8","inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[5,1]}],"outputs":[{"name":"label_bytes"},{"name":"sum","parameters":{"binary_data":true}}],"parameters":{"binary_data_output":true}}`),
			"Content-Type", jsonCT)
		want := `{"id":"8","model_name":"multi_out","model_version":null,"outputs":[{"name":"label_bytes","shape":[1],"datatype":"BYTES","data":["first"]},{"name":"sum","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}]}`
		if string(r.body) != want+string(f32le(6)) {
			t.Errorf("%d %q", r.status, r.body)
		}
	})
}

func TestMLServer(t *testing.T) {
	url := startServer(t, Options{Kind: "mlserver"})
	cases := []pyCase{
		{name: "binary request", path: "/v2/models/half_plus_two/infer", body: []byte("{\"inputs\":[]}\x00"),
			hdr: []string{"Content-Type", "application/octet-stream", "Inference-Header-Content-Length", "13"}, status: 422,
			detail: `[{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a valid dictionary or object to extract fields from","input":"{\"inputs\":[]}\u0000"}]`},
		{name: "JSON decode error", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[,]}`), status: 422,
			detail: `[{"type":"json_invalid","loc":["body",11],"msg":"JSON decode error","input":{},"ctx":{"error":"Expecting value"}}]`},
		{name: "missing data", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]}`), status: 422,
			detail: `[{"type":"missing","loc":["body","inputs",0,"data"],"msg":"Field required","input":{"name":"x","datatype":"FP32","shape":[1]}}]`},
		{name: "BF16 is not in the enum", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[{"name":"x","datatype":"BF16","shape":[1],"data":[1]}]}`), status: 422,
			detail: `[{"type":"enum","loc":["body","inputs",0,"datatype"],"msg":"Input should be 'BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'FP32', 'FP64' or 'BYTES'","input":"BF16","ctx":{"expected":"'BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'FP32', 'FP64' or 'BYTES'"}}]`},
		{name: "unknown model", path: "/v2/models/nope/infer", body: []byte(`{"inputs":[]}`), status: 404, err: "Model nope not found"},
		{name: "unknown version", path: "/v2/models/simple/versions/2/infer", body: []byte(`{"inputs":[]}`), status: 404,
			err: "Model simple with version 2 not found"},
		{name: "undecodable data", path: "/v2/models/half_plus_two/infer", body: []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":[1]}]}`),
			status: 500, text: "Internal Server Error"},
		{name: "model check", path: "/v2/models/simple/infer", body: []byte(`{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":` + i32json(seq32(0, 16)) + `}]}`),
			status: 400, err: "expected 2 inputs but got 1 inputs for model 'simple'. Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all required input(s)."},
	}
	runPyCases(t, url, cases)

	success := []struct {
		name, path, body, want string
	}{
		{"NaN in, null out; versioned path; scalar data", "/v2/models/half_plus_two/versions/1/infer",
			`{"id":"m1","inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":NaN}]}`,
			`{"model_name":"half_plus_two","model_version":"1","id":"m1","outputs":[{"name":"y","shape":[1,1],"datatype":"FP32","parameters":{"content_type":"np"},"data":[null]}]}`},
		{"base64 input, base64 output when not UTF-8", "/v2/models/bytes_echo/infer",
			`{"id":"m2","inputs":[{"name":"text","datatype":"BYTES","shape":[1],"parameters":{"content_type":"base64"},"data":["AP8="]}]}`,
			`{"model_name":"bytes_echo","model_version":"1","id":"m2","outputs":[{"name":"echo","shape":[1,1],"datatype":"BYTES","parameters":{"content_type":"base64"},"data":["AP8="]},{"name":"echo_bytes","shape":[1,1],"datatype":"BYTES","parameters":{"content_type":"base64"},"data":["/wA="]}]}`},
		{"requested outputs are ignored; FP16 as numbers", "/v2/models/half_times_two/infer",
			`{"id":"m3","inputs":[{"name":"x","datatype":"FP16","shape":[1,4],"data":[0.1,1,2,65504]}],"outputs":[{"name":"nope"}]}`,
			`{"model_name":"half_times_two","model_version":"1","id":"m3","outputs":[{"name":"y","shape":[1,4],"datatype":"FP16","parameters":{"content_type":"np"},"data":[0.199951171875,2.0,4.0,null]}]}`},
	}
	for _, c := range success {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, "POST", url+c.path, []byte(c.body))
			if r.status != 200 || string(r.body) != c.want || r.header.Get("Content-Type") != jsonCT {
				t.Errorf("%d %s\n got %s\nwant %s", r.status, r.header.Get("Content-Type"), r.body, c.want)
			}
		})
	}
}

func TestPythonDecodeDetails(t *testing.T) {
	cases := []struct {
		name  string
		dt    string
		shape []int64
		data  string
		want  []string
		exc   string
	}{
		{"int truncates floats", "INT32", []int64{3}, "[1.7,-1.7,true]", ints(1, -1, 1), ""},
		{"numeric strings", "FP64", []int64{2}, `["1.5"," -2 "]`, fl(1.5, -2), ""},
		{"bad string for float", "FP32", []int64{1}, `["x"]`, nil, "ValueError : could not convert string to float: 'x'"},
		{"bad string for int", "INT64", []int64{1}, `["1.5"]`, nil, "ValueError : invalid literal for int() with base 10: '1.5'"},
		{"null for int", "INT8", []int64{1}, `[null]`, nil, "TypeError : int() argument must be a string, a bytes-like object or a real number, not 'NoneType'"},
		{"negative into unsigned", "UINT8", []int64{1}, `[-1]`, nil, "OverflowError : Python integer -1 out of bounds for uint8"},
		{"NaN into int", "INT16", []int64{1}, `[NaN]`, nil, "ValueError : cannot convert float NaN to integer"},
		{"bool truthiness", "BOOL", []int64{4}, `[0,2,"",null]`, bools(false, true, false, false), ""},
		{"one -1 is inferred", "FP32", []int64{-1, 2}, `[1,2,3,4]`, fl(1, 2, 3, 4), ""},
		{"BYTES from other values", "BYTES", []int64{3}, `["a",1.5,true]`, quoted("a", "1.5", "True"), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc, serr := scanDocument([]byte(c.data), dialectPython)
			if serr != nil {
				t.Fatal(serr)
			}
			dt, _ := tensor.ParseV2(c.dt)
			tt, exc := pyCoerce("x", dt, c.shape, doc, false)
			switch {
			case c.exc != "":
				if exc == nil || exc.text() != c.exc {
					t.Errorf("exception %v, want %q", exc, c.exc)
				}
			case exc != nil:
				t.Errorf("unexpected exception %s", exc.text())
			default:
				got := binaryValues(t, c.dt, binaryBytes(&tt))
				if !slices.Equal(got, c.want) {
					t.Errorf("values %v, want %v", got, c.want)
				}
				if c.shape[0] == -1 && !reflect.DeepEqual(tt.Shape, []int64{2, 2}) {
					t.Errorf("shape %v", tt.Shape)
				}
			}
		})
	}
}

func TestNestedShape(t *testing.T) {
	deep := strings.Repeat("[", 65) + strings.Repeat("]", 65)
	cases := []struct {
		data  string
		shape []int64
		exc   string
	}{
		{"[]", []int64{0}, ""},
		{"[[],[]]", []int64{2, 0}, ""},
		{"[[[1]],[[2]]]", []int64{2, 1, 1}, ""},
		{"[[1,2],[3]]", nil, "after 1 dimensions. The detected shape was (2,) + inhomogeneous part."},
		{"[1,[2]]", nil, "after 1 dimensions. The detected shape was (2,) + inhomogeneous part."},
		{"[[1],[[2]]]", nil, "after 2 dimensions. The detected shape was (2, 1) + inhomogeneous part."},
		{"[[[1,2],[3,4]],[[5,6],[7]]]", nil, "after 2 dimensions. The detected shape was (2, 2) + inhomogeneous part."},
		{deep, nil, "exceed the maximum number of dimension of 64."},
	}
	for _, c := range cases {
		doc, serr := scanDocument([]byte(c.data), dialectPython)
		if serr != nil {
			t.Fatal(serr)
		}
		shape, exc := nestedShape(doc)
		switch {
		case c.exc != "":
			if exc == nil || !strings.HasSuffix(exc.msg, c.exc) {
				t.Errorf("%s: exception %v, want ...%s", c.data, exc, c.exc)
			}
		case exc != nil || !slices.Equal(shape, c.shape):
			t.Errorf("%s: shape %v %v, want %v", c.data, shape, exc, c.shape)
		}
	}
}
