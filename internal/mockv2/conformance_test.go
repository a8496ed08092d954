package mockv2

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/test/conformance"
)

// vectorModels maps models the vectors use to the sample model standing in
// for them. Each error these vectors expect arises before the model's own
// inputs matter (or the stand-in has the same input names and types).
var vectorModels = map[string]string{
	"onnx_zero_1_float32":   "half_plus_two",  // errors before any input is matched
	"simple_identity_int64": "identity_int64", // INPUT0 INT64, shape [1,1] fits [-1,-1]
	"sum-model":             "simple",         // the 422 comes from body validation
	"test_model":            "simple",         // the 400 comes before decoding
}

// vectorSkips are server-side vectors the mock cannot reproduce, with why.
var vectorSkips = map[string]string{
	"triton-raw-binary-bytes-one-element": "needs a BYTES model with dims [1]; the raw BYTES path is covered by TestTritonRawRequests",
	"triton-raw-binary-two-variable-dims": "needs a model with two variable dims; the raw-input errors are covered by TestTritonRawRequests",
	"triton-fp16-binary-input":            "needs an FP16 identity model with dims [1]; FP16 binary in/out is covered by TestModels (half_times_two)",
}

type vectorInput struct {
	Target string `json:"target"`
	HTTP   *struct {
		Method  string            `json:"method"`
		Path    string            `json:"path"`
		Headers map[string]string `json:"headers"`
	} `json:"http"`
	JSON         json.RawMessage   `json:"json"`
	JSONText     *string           `json:"json_text"`
	BinaryHex    string            `json:"binary_hex"`
	BodyHex      *string           `json:"body_hex"`
	BodyNote     string            `json:"body_note"`
	JSONTemplate json.RawMessage   `json:"json_template"`
	Depths       map[string]string `json:"depths"`
}

type vectorExpect struct {
	Status          *int                     `json:"status"`
	StatusNot       *int                     `json:"status_not"`
	StatusFromCode  *int                     `json:"status_from_code"`
	Headers         map[string]*string       `json:"headers"`
	BodyExact       *string                  `json:"body_exact"`
	ErrorExact      *string                  `json:"error_exact_from_code"`
	ErrorContains   *string                  `json:"error_contains"`
	JSON            json.RawMessage          `json:"json"`
	JSONText        *string                  `json:"json_text"`
	JSONTextDerived *string                  `json:"json_text_derived"`
	BinaryHex       *string                  `json:"binary_hex"`
	OutputsData     map[string][]json.Number `json:"outputs_data"`
	JSONPath        string                   `json:"json_path"`
	Value           json.RawMessage          `json:"value"`
}

func TestConformanceVectors(t *testing.T) {
	urls := map[string]string{}
	for _, kind := range []string{"triton", "kserve", "mlserver"} {
		urls[kind] = startServer(t, Options{Kind: kind})
	}
	ran := 0
	for _, c := range conformance.MustLoad(t, "oip_cases.json") {
		var in vectorInput
		conformance.Decode(t, c.Input, &in)
		url, serverSide := urls[in.Target]
		if !serverSide || in.HTTP == nil {
			continue // client, encoder or codec vectors: not about a server
		}
		t.Run(c.ID, func(t *testing.T) {
			if why, ok := vectorSkips[c.ID]; ok {
				t.Skip(why)
			}
			ran++
			path := in.HTTP.Path
			for from, to := range vectorModels {
				path = strings.Replace(path, "/models/"+from+"/", "/models/"+to+"/", 1)
			}
			var hdr []string
			for k, v := range in.HTTP.Headers {
				if i := strings.Index(v, " ("); i > 0 {
					v = v[:i] // "application/x-www-form-urlencoded (curl -d default; ...)"
				}
				hdr = append(hdr, k, v)
			}
			var body []byte
			switch {
			case in.JSONText != nil:
				bin, err := hex.DecodeString(in.BinaryHex)
				if err != nil {
					t.Fatal(err)
				}
				body = append([]byte(*in.JSONText), bin...)
			case in.BodyHex != nil:
				b, err := hex.DecodeString(*in.BodyHex)
				if err != nil {
					t.Fatal(err)
				}
				body = b
			case in.JSON != nil:
				body = in.JSON
			case in.BodyNote != "":
				body = []byte("\x00\x01 not JSON at all \xff")
			}
			if in.JSONTemplate != nil {
				runDepthVector(t, url+path, in, c.Expected, hdr)
				return
			}
			var exp vectorExpect
			conformance.Decode(t, c.Expected, &exp)
			r := call(t, in.HTTP.Method, url+path, body, hdr...)
			checkVector(t, r, exp)
		})
	}
	if ran < 12 {
		t.Errorf("only %d server-side vectors ran", ran)
	}
}

// runDepthVector builds the nesting-depth requests of a json_template
// vector: "data" is 123 wrapped in N levels of [].
func runDepthVector(t *testing.T, url string, in vectorInput, expected json.RawMessage, hdr []string) {
	var exps map[string]vectorExpect
	conformance.Decode(t, expected, &exps)
	for depth := range in.Depths {
		n, err := strconv.Atoi(depth)
		if err != nil {
			t.Fatal(err)
		}
		data := strings.Repeat("[", n) + "123" + strings.Repeat("]", n)
		body := regexp.MustCompile(`"<[^"]*>"`).ReplaceAll(in.JSONTemplate, []byte(data))
		exp, ok := exps["depth_"+depth]
		if !ok {
			t.Fatalf("no expectation for depth %s", depth)
		}
		checkVector(t, call(t, "POST", url, body, hdr...), exp)
	}
}

func checkVector(t *testing.T, r response, exp vectorExpect) {
	t.Helper()
	switch {
	case exp.Status != nil && r.status != *exp.Status:
		t.Errorf("status %d, want %d (%s)", r.status, *exp.Status, r.body)
	case exp.Status == nil && exp.StatusFromCode != nil && r.status != *exp.StatusFromCode:
		t.Errorf("status %d, want %d from the code (%s)", r.status, *exp.StatusFromCode, r.body)
	}
	if exp.StatusNot != nil && r.status == *exp.StatusNot {
		t.Errorf("status %d, want anything else (%s)", r.status, r.body)
	}
	for k, v := range exp.Headers {
		got, present := r.header[http.CanonicalHeaderKey(k)]
		switch {
		case v == nil && present:
			t.Errorf("header %s = %q, want it absent", k, got)
		case v != nil && (!present || got[0] != *v):
			t.Errorf("header %s = %q, want %q", k, got, *v)
		}
	}
	if exp.BodyExact != nil && string(r.body) != *exp.BodyExact {
		t.Errorf("body\n got %s\nwant %s", r.body, *exp.BodyExact)
	}
	if exp.ErrorExact != nil {
		if got := errorText(t, r); got != *exp.ErrorExact {
			t.Errorf("error\n got %q\nwant %q", got, *exp.ErrorExact)
		}
	}
	if exp.ErrorContains != nil {
		if got := errorText(t, r); !strings.Contains(got, *exp.ErrorContains) {
			t.Errorf("error %q does not contain %q", got, *exp.ErrorContains)
		}
	}
	if exp.JSON != nil {
		var got, want any
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatalf("body %q: %v", r.body, err)
		}
		_ = json.Unmarshal(exp.JSON, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("body\n got %s\nwant %s", r.body, exp.JSON)
		}
	}
	if exp.JSONText != nil {
		want := []byte(*exp.JSONText)
		if exp.BinaryHex != nil {
			bin, _ := hex.DecodeString(*exp.BinaryHex)
			want = append(want, bin...)
		}
		if !bytes.Equal(r.body, want) {
			t.Errorf("body\n got %q\nwant %q", r.body, want)
		}
	}
	if exp.JSONTextDerived != nil && string(r.body) != *exp.JSONTextDerived {
		t.Errorf("body\n got %s\nwant %s (derived)", r.body, *exp.JSONTextDerived)
	}
	if exp.OutputsData != nil {
		_, outs := decodeV2(t, r)
		for _, o := range outs {
			want := make([]string, len(exp.OutputsData[o.Name]))
			for i, n := range exp.OutputsData[o.Name] {
				want[i] = n.String()
			}
			if !slices.Equal(o.Values, want) {
				t.Errorf("output %s = %v, want %v", o.Name, o.Values, want)
			}
		}
		if len(outs) != len(exp.OutputsData) {
			t.Errorf("%d outputs, want %d", len(outs), len(exp.OutputsData))
		}
	}
	if exp.JSONPath != "" {
		var doc any
		if err := json.Unmarshal(r.body, &doc); err != nil {
			t.Fatalf("body %q: %v", r.body, err)
		}
		got := jsonPath(t, doc, exp.JSONPath)
		var want any
		_ = json.Unmarshal(exp.Value, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", exp.JSONPath, got, want)
		}
	}
}

// jsonPath evaluates paths like detail[0].msg.
func jsonPath(t *testing.T, doc any, path string) any {
	t.Helper()
	for _, part := range strings.Split(path, ".") {
		name, idx := part, -1
		if i := strings.IndexByte(part, '['); i >= 0 {
			name = part[:i]
			idx, _ = strconv.Atoi(strings.TrimSuffix(part[i+1:], "]"))
		}
		obj, ok := doc.(map[string]any)
		if !ok {
			t.Fatalf("%s: not an object", path)
		}
		doc = obj[name]
		if idx >= 0 {
			list, ok := doc.([]any)
			if !ok || idx >= len(list) {
				t.Fatalf("%s: no element %d", path, idx)
			}
			doc = list[idx]
		}
	}
	return doc
}
