package mockv2

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

type modelIn struct {
	name, dt string
	shape    []int64
	data     string // JSON data
	bin      []byte // the same values in the binary format
}

type modelOut struct {
	name, dt string
	shape    []int64
	values   []string
}

type modelCase struct {
	model string
	in    []modelIn
	out   []modelOut
}

func seq32(from, n int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = from + int32(i)
	}
	return out
}

func i32strs(vs []int32) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprint(v)
	}
	return out
}

func i32json(vs []int32) string { return "[" + strings.Join(i32strs(vs), ",") + "]" }

func f16round(vs ...float32) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = binaryValues(nil, "FP16", f16le(v))[0]
	}
	return out
}

var modelCases = func() []modelCase {
	ones := slices.Repeat([]int32{1}, 16)
	const big = 9007199254740993 // 2^53+1: not a float64
	fp := []float32{6.8, 2.8, 4.8, 1.4, 6.0, 3.4, 4.5, 1.6}
	return []modelCase{
		{"half_plus_two",
			[]modelIn{{"x", "FP32", []int64{3}, "[1.0,2.0,5.0]", f32le(1, 2, 5)}},
			[]modelOut{{"y", "FP32", []int64{3}, f32s(2.5, 3, 4.5)}}},
		{"simple",
			[]modelIn{
				{"INPUT0", "INT32", []int64{1, 16}, i32json(seq32(1, 16)), i32le(seq32(1, 16)...)},
				{"INPUT1", "INT32", []int64{1, 16}, i32json(ones), i32le(ones...)},
			},
			[]modelOut{
				{"OUTPUT0", "INT32", []int64{1, 16}, i32strs(seq32(2, 16))},
				{"OUTPUT1", "INT32", []int64{1, 16}, i32strs(seq32(0, 16))},
			}},
		{"bytes_echo",
			[]modelIn{{"text", "BYTES", []int64{2}, `["abc","hello world"]`, strsLE("abc", "hello world")}},
			[]modelOut{
				{"echo", "BYTES", []int64{2}, quoted("abc", "hello world")},
				{"echo_bytes", "BYTES", []int64{2}, quoted("cba", "dlrow olleh")},
			}},
		{"half_times_two",
			[]modelIn{{"x", "FP16", []int64{1, 4}, "[1,2,3,-0.5]", f16le(1, 2, 3, -0.5)}},
			[]modelOut{{"y", "FP16", []int64{1, 4}, fl(2, 4, 6, -1)}}},
		{"multi_out",
			[]modelIn{{"x", "FP32", []int64{2, 2}, "[[1,2],[5,-1]]", f32le(1, 2, 5, -1)}},
			[]modelOut{
				{"sum", "FP32", []int64{2}, fl(3, 4)},
				{"label_bytes", "BYTES", []int64{2}, quoted("second", "first")},
				{"argmax", "INT64", []int64{2}, ints(1, 0)},
			}},
		{"mixed_types",
			[]modelIn{
				{"flag", "BOOL", []int64{2, 1}, "[[true],[false]]", []byte{1, 0}},
				{"count", "INT64", []int64{2, 1}, fmt.Sprintf("[[3],[%d]]", big), i64le(3, big)},
				{"value", "FP64", []int64{2, 1}, "[[1.5],[2.0]]", f64le(1.5, 2)},
			},
			[]modelOut{
				{"not_flag", "BOOL", []int64{2, 1}, bools(false, true)},
				{"count_plus_one", "INT64", []int64{2, 1}, ints(4, big+1)},
				{"scaled", "FP64", []int64{2, 1}, fl(4.5, 2*float64(int64(big)))},
			}},
		{"fixed3",
			[]modelIn{{"x", "FP32", []int64{3}, "[1,2,3]", f32le(1, 2, 3)}},
			[]modelOut{
				{"reversed", "FP32", []int64{3}, fl(3, 2, 1)},
				{"total", "FP32", []int64{1}, fl(6)},
			}},
		{"identity_int64",
			[]modelIn{{"INPUT0", "INT64", []int64{1, 2}, "[-5,9223372036854775807]", i64le(-5, math.MaxInt64)}},
			[]modelOut{{"OUTPUT0", "INT64", []int64{1, 2}, ints(-5, math.MaxInt64)}}},
		{"FP16OutputModel",
			[]modelIn{{"fp32_input", "FP32", []int64{2, 4}, "[6.8,2.8,4.8,1.4,6.0,3.4,4.5,1.6]", f32le(fp...)}},
			[]modelOut{
				{"fp16_output", "FP16", []int64{8}, f16round(fp...)},
				{"fp32_output", "FP32", []int64{8}, f32s(fp...)},
			}},
		{"FP16InputModel",
			[]modelIn{
				{"fp16_input", "FP16", []int64{1, 4}, "[1.5,2,-3,0.25]", f16le(1.5, 2, -3, 0.25)},
				{"str_input", "BYTES", []int64{1, 4}, `["cat","dog","cat","dog"]`, strsLE("cat", "dog", "cat", "dog")},
			},
			[]modelOut{
				{"str_output", "BYTES", []int64{4}, quoted("cat", "dog", "cat", "dog")},
				{"fp32_output", "FP32", []int64{4}, fl(1.5, 2, -3, 0.25)},
			}},
		{"slow",
			[]modelIn{{"x", "FP32", []int64{1}, "[7]", f32le(7)}},
			[]modelOut{{"y", "FP32", []int64{1}, fl(7)}}},
		imageCase(),
	}
}()

// imageCase sends one 224×224×3 image of 0.25s: every score is the mean
// pixel value plus k/1000.
func imageCase() modelCase {
	const n = 224 * 224 * 3
	pixels := make([]float32, n)
	for i := range pixels {
		pixels[i] = 0.25
	}
	scores := make([]float32, 1000)
	for k := range scores {
		scores[k] = 0.25 + float32(k)/1000
	}
	data := "[" + strings.TrimSuffix(strings.Repeat("0.25,", n), ",") + "]"
	return modelCase{"image_classifier",
		[]modelIn{{"image", "FP32", []int64{1, 224, 224, 3}, data, f32le(pixels...)}},
		[]modelOut{{"scores", "FP32", []int64{1, 1000}, f32s(scores...)}}}
}

func jsonInputs(in []modelIn) string {
	parts := make([]string, len(in))
	for i, x := range in {
		parts[i] = fmt.Sprintf(`{"name":%q,"datatype":%q,"shape":%s,"data":%s}`, x.name, x.dt, jsonList(anySlice(x.shape)...), x.data)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func binaryInputs(in []modelIn) (string, [][]byte) {
	parts := make([]string, len(in))
	var blobs [][]byte
	for i, x := range in {
		parts[i] = fmt.Sprintf(`{"name":%q,"datatype":%q,"shape":%s,"parameters":{"binary_data_size":%d}}`,
			x.name, x.dt, jsonList(anySlice(x.shape)...), len(x.bin))
		blobs = append(blobs, x.bin)
	}
	return "[" + strings.Join(parts, ",") + "]", blobs
}

func anySlice(s []int64) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func hasDT(c modelCase, dt string, outputs bool) bool {
	if outputs {
		for _, o := range c.out {
			if o.dt == dt {
				return true
			}
		}
		return false
	}
	for _, i := range c.in {
		if i.dt == dt {
			return true
		}
	}
	return false
}

// TestModels runs every sample model on every kind, with every request
// and response form the kind supports, and checks the decoded outputs.
func TestModels(t *testing.T) {
	type variant struct {
		name       string
		binaryIn   bool
		binaryOut  bool
		applicable func(modelCase) bool
	}
	all := func(modelCase) bool { return true }
	noJSONFP16In := func(c modelCase) bool { return !hasDT(c, "FP16", false) }
	noJSONFP16 := func(c modelCase) bool { return !hasDT(c, "FP16", false) && !hasDT(c, "FP16", true) }
	kinds := map[string][]variant{
		"triton": {
			{"json-in/json-out", false, false, noJSONFP16},
			{"json-in/binary-out", false, true, noJSONFP16In},
			{"binary-in/binary-out", true, true, all},
		},
		"kserve": {
			{"json-in/json-out", false, false, noJSONFP16},
			{"json-in/binary-out", false, true, noJSONFP16In},
			{"binary-in/binary-out", true, true, all},
		},
		"mlserver": {{"json-in/json-out", false, false, all}},
	}
	for kind, variants := range kinds {
		url := startServer(t, Options{Kind: kind, Delay: 20 * time.Millisecond})
		for _, c := range modelCases {
			for _, v := range variants {
				if !v.applicable(c) {
					continue
				}
				t.Run(kind+"/"+c.model+"/"+v.name, func(t *testing.T) {
					t.Parallel()
					params := ""
					if v.binaryOut {
						params = `,"parameters":{"binary_data_output":true}`
					}
					var body []byte
					hdr := []string{"Content-Type", "application/json"}
					if v.binaryIn {
						inputs, blobs := binaryInputs(c.in)
						var ihcl string
						body, ihcl = binaryBody(`{"id":"t1","inputs":`+inputs+params+`}`, blobs...)
						hdr = []string{"Content-Type", "application/octet-stream", "Inference-Header-Content-Length", ihcl}
					} else {
						body = []byte(`{"id":"t1","inputs":` + jsonInputs(c.in) + params + `}`)
					}
					start := time.Now()
					r := call(t, "POST", url+"/v2/models/"+c.model+"/infer", body, hdr...)
					if r.status != 200 {
						t.Fatalf("status %d: %s", r.status, r.body)
					}
					if c.model == "slow" && time.Since(start) < 20*time.Millisecond {
						t.Errorf("slow answered after %v, want at least the 20ms delay", time.Since(start))
					}
					checkHeaders(t, kind, r, v.binaryOut)
					doc, outs := decodeV2(t, r)
					if doc["id"] != "t1" {
						t.Errorf("id = %v, want t1", doc["id"])
					}
					wantVersion := map[string]any{"triton": "1", "kserve": nil, "mlserver": "1"}[kind]
					if doc["model_version"] != wantVersion {
						t.Errorf("model_version = %#v, want %#v", doc["model_version"], wantVersion)
					}
					if len(outs) != len(c.out) {
						t.Fatalf("%d outputs, want %d", len(outs), len(c.out))
					}
					for i, want := range c.out {
						got := outs[i]
						shape := want.shape
						if kind == "mlserver" && len(shape) == 1 {
							shape = []int64{shape[0], 1}
						}
						if got.Name != want.name || got.Datatype != want.dt || !slices.Equal(got.Shape, shape) {
							t.Errorf("output %d = %s %s %v, want %s %s %v", i, got.Name, got.Datatype, got.Shape, want.name, want.dt, shape)
						}
						if got.Binary != v.binaryOut {
							t.Errorf("output %s binary = %v, want %v", got.Name, got.Binary, v.binaryOut)
						}
						if !slices.Equal(got.Values, want.values) {
							t.Errorf("output %s = %v, want %v", got.Name, got.Values, want.values)
						}
					}
				})
			}
		}
	}
}

func checkHeaders(t *testing.T, kind string, r response, binaryOut bool) {
	t.Helper()
	cl := r.header.Get("Content-Length")
	if kind == "kserve" && binaryOut {
		if cl != "" {
			t.Errorf("KServe binary response has Content-Length %s, want chunked", cl)
		}
	} else if cl != strconv.Itoa(len(r.body)) {
		t.Errorf("Content-Length %q for a %d-byte body", cl, len(r.body))
	}
	ct, ihcl := r.header.Get("Content-Type"), r.header.Get("Inference-Header-Content-Length")
	switch {
	case !binaryOut:
		if ct != "application/json" || ihcl != "" {
			t.Errorf("JSON response headers: Content-Type %q, IHCL %q", ct, ihcl)
		}
	case kind == "triton":
		if ct != "application/octet-stream" || ihcl == "" {
			t.Errorf("Triton binary response headers: Content-Type %q, IHCL %q", ct, ihcl)
		}
	case kind == "kserve":
		if _, ok := r.header["Content-Type"]; ok || ihcl == "" {
			t.Errorf("KServe binary response headers: Content-Type %q, IHCL %q", ct, ihcl)
		}
	}
}

// TestLargeResponse checks a response far above net/http's automatic
// Content-Length threshold, in both forms.
func TestLargeResponse(t *testing.T) {
	const n = 50000
	data := make([]string, n)
	for i := range data {
		data[i] = strconv.Itoa(i % 100)
	}
	for _, params := range []string{"", `,"parameters":{"binary_data_output":true}`} {
		url := startServer(t, Options{Kind: "triton"})
		body := `{"inputs":[{"name":"x","datatype":"FP32","shape":[` + strconv.Itoa(n) + `],"data":[` + strings.Join(data, ",") + `]}]` + params + `}`
		r := call(t, "POST", url+"/v2/models/half_plus_two/infer", []byte(body))
		if r.status != 200 || r.header.Get("Content-Length") != strconv.Itoa(len(r.body)) {
			t.Fatalf("%d, Content-Length %q for %d bytes", r.status, r.header.Get("Content-Length"), len(r.body))
		}
		_, outs := decodeV2(t, r)
		if len(outs[0].Values) != n || outs[0].Values[n-1] != fmtFloat(0.5*99+2) {
			t.Errorf("%d values, last %s", len(outs[0].Values), outs[0].Values[n-1])
		}
	}
}
