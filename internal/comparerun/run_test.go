package comparerun

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Endpoint
		wantErr string
	}{
		{in: "tf:http://127.0.0.1:8501/", want: Endpoint{URL: "http://127.0.0.1:8501", Kind: "auto"}},
		{in: "v2:http://triton:8000", want: Endpoint{V2: true, URL: "http://triton:8000", Kind: "auto"}},
		{in: "v2:https://kserve.example/,kind=kserve,map=m.yaml", want: Endpoint{V2: true, URL: "https://kserve.example", Kind: "kserve", Map: "m.yaml"}},
		{in: "http://127.0.0.1:8501", wantErr: `unknown kind "http"`},
		{in: "127.0.0.1", wantErr: "want tf:URL or v2:URL"},
		{in: "v2:http://x,kind=onnx", wantErr: `unknown option "kind=onnx"`},
		{in: "tf:ftp://x", wantErr: "want an http:// or https:// URL"},
		{in: "tf:http://x/?q=1", wantErr: "want an http:// or https:// URL"},
	} {
		got, err := ParseEndpoint(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseEndpoint(%q) = %v, want an error containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		tc.want.Spec = tc.in
		if err != nil || got != tc.want {
			t.Errorf("ParseEndpoint(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseRequests(t *testing.T) {
	good := "{\"model\": \"half_plus_two\", \"body\": {\"instances\": [1.0]}}\n\n" +
		`{"model": "linear_classifier", "verb": "classify", "body": {"examples": [{"x": 1}]}}` + "\n"
	reqs, err := ParseRequests([]byte(good), 10)
	if err != nil || len(reqs) != 2 || reqs[0].Verb != "predict" || reqs[1].path() != "/v1/models/linear_classifier:classify" {
		t.Fatalf("ParseRequests = %+v, %v", reqs, err)
	}
	for _, tc := range []struct {
		r    Request
		want string
	}{
		{Request{Model: "m", Version: "3", Verb: "predict"}, "/v1/models/m/versions/3:predict"},
		{Request{Model: "m", Label: "stable", Verb: "classify"}, "/v1/models/m/labels/stable:classify"},
	} {
		if got := tc.r.path(); got != tc.want {
			t.Errorf("path of %+v = %q, want %q", tc.r, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{`{"model": "m", "version": "3", "body": {}}`, ""},
		{`{"model": "m", "label": "stable", "verb": "regress", "body": {}}`, ""},
		{`{"model": "m", "version": "x", "body": {}}`, `line 1: version "x"`},
		{`{"model": "m", "version": "1", "label": "a", "body": {}}`, "give at most one"},
		{`{"model": "m", "label": "a/b", "body": {}}`, `line 1: label "a/b"`},
		{"", "no requests"},
		{`{"model": "m", "body": {}}` + "\n" + `{"model": "m", "body": [1]}`, "line 2: body: want the request's JSON object"},
		{`{"model": "../x", "body": {}}`, `line 1: model "../x"`},
		{`{"model": "m", "verb": "explain", "body": {}}`, `line 1: verb "explain"`},
		{`{"model": "m", "body": {}, "extra": 1}`, `line 1: json: unknown field "extra"`},
		{`{"model": "m", "body": {}}` + "\n" + `{"model": "m", "body": {}}` + "\n" + `{"model": "m", "body": {}}`, "line 3: more than 2 requests"},
		{`not json`, "line 1: invalid character"},
	} {
		reqs, err := ParseRequests([]byte(tc.in), 2)
		if tc.want == "" {
			if err != nil || len(reqs) != 1 {
				t.Errorf("ParseRequests(%q) = %v", tc.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRequests(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

// The same seed generates the same requests, of the signature's shapes
// and dtypes; another seed other values.
func TestGenerate(t *testing.T) {
	base := startTF(t, nil)
	gen := func(seed uint64) []Request {
		reqs, err := Generate(context.Background(), testClient, base, GenerateOptions{
			Models: []string{"simple", "mixed_types"}, N: 2, Seed: seed, Batch: 3, MaxElements: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return reqs
	}
	a, b, c := gen(7), gen(7), gen(8)
	if len(a) != 4 || a[0].Model != "simple" || a[2].Model != "mixed_types" {
		t.Fatalf("generated %+v", a)
	}
	bodies := func(reqs []Request) [][]byte {
		var out [][]byte
		for i := range reqs {
			b, err := reqs[i].body()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
		return out
	}
	// Built in reverse: a body does not depend on the others.
	slices.Reverse(b)
	ba, bb, bc := bodies(a), bodies(b), bodies(c)
	slices.Reverse(bb)
	for i := range ba {
		if !bytes.Equal(ba[i], bb[i]) {
			t.Errorf("request %d differs with the same seed:\n%s\n%s", i, ba[i], bb[i])
		}
		if bytes.Equal(ba[i], bc[i]) {
			t.Errorf("request %d is the same with another seed: %s", i, ba[i])
		}
		if i > 0 && a[i].Model == a[i-1].Model && bytes.Equal(ba[i], ba[i-1]) {
			t.Errorf("requests %d and %d are the same", i-1, i)
		}
	}
	// simple: two INT32 inputs [-1, 16] → [3][16] small integers.
	if !bytes.HasPrefix(ba[0], []byte(`{"inputs": {"INPUT0": [[`)) || bytes.Count(ba[0], []byte("[")) != 2*(1+3) || bytes.Contains(ba[0], []byte(".")) {
		t.Errorf("simple's request is not two [3][16] integer inputs: %s", ba[0])
	}
	// mixed_types: BOOL, INT64, FP64 [-1, 1], in name order.
	if !bytes.Contains(ba[2], []byte(`{"inputs": {"count": [[`)) || !bytes.Contains(ba[2], []byte(`"flag": [[`)) || !bytes.Contains(ba[2], []byte(`"value": [[`)) {
		t.Errorf("mixed_types's request: %s", ba[2])
	}
	if _, err := Generate(context.Background(), testClient, base, GenerateOptions{Models: []string{"image_classifier"}, N: 1, Batch: 2, MaxElements: 1000}); err == nil ||
		!strings.Contains(err.Error(), "more than 1000 elements") {
		t.Errorf("a request over MaxElements: %v", err)
	}
	if _, err := Generate(context.Background(), testClient, base, GenerateOptions{Models: []string{"no_such_model"}, N: 1, Batch: 1, MaxElements: 1000}); err == nil ||
		!strings.Contains(err.Error(), "no_such_model metadata: 404") {
		t.Errorf("an unknown model: %v", err)
	}
}

// classifyRequests are the demo's classify and regress requests.
var classifyRequests = []Request{
	{Model: "linear_classifier", Verb: "classify", Body: []byte(`{"examples": [{"x": 0}, {"x": 2}, {"x": -1}]}`)},
	{Model: "linear_regressor", Verb: "regress", Body: []byte(`{"context": {"w": 3}, "examples": [{"x": 1}, {"x": 2}]}`)},
	{Model: "no_such_model", Verb: "predict", Body: []byte(`{"instances": [1.0]}`)},
}

func TestRunIdentical(t *testing.T) {
	base := startTF(t, nil)
	reqs, err := Generate(context.Background(), testClient, base, GenerateOptions{
		Models: []string{"half_plus_two", "multi_out", "mixed_types"}, N: 4, Seed: 1, Batch: 2, MaxElements: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rep := runAgainst(t, append(reqs, classifyRequests...), nil)
	if !rep.Passed() || rep.Requests != 15 || rep.Mismatches != 0 {
		t.Fatalf("identical mocks: passed %v, %d requests, %d mismatches", rep.Passed(), rep.Requests, rep.Mismatches)
	}
	rows := 0
	for _, m := range rep.Models {
		for _, r := range m.Rows {
			rows++
			if r.Identical != r.Requests || r.Requests != m.Requests || r.MaxAbs != 0 {
				t.Errorf("%s/%s: %d of %d identical (model %d), max abs %g", m.Model, r.Output, r.Identical, r.Requests, m.Requests, r.MaxAbs)
			}
		}
	}
	// half_plus_two 1, multi_out 3, mixed_types 3, classifier 2, regressor 1, unknown model 1 (error)
	if rows != 11 {
		t.Errorf("%d rows, want 11", rows)
	}
	if r := row(t, rep, "linear_classifier", "scores"); r.Top1Total != 3 || r.Top1Agree != 3 {
		t.Errorf("top-1 %d of %d, want 3 of 3", r.Top1Agree, r.Top1Total)
	}
	if r := row(t, rep, "no_such_model", ErrorRow); r.Identical != 1 {
		t.Errorf("the unknown model's errors: %+v", r)
	}
}

func TestRunPerturbed(t *testing.T) {
	base := startTF(t, nil)
	reqs, err := Generate(context.Background(), testClient, base, GenerateOptions{
		Models: []string{"half_plus_two", "multi_out"}, N: 5, Seed: 1, Batch: 2, MaxElements: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rep := runAgainst(t, append(reqs, classifyRequests...), map[string]float64{"half_plus_two": 0.25, "linear_classifier": 0.01})
	if rep.Passed() || rep.Mismatches != 5+1 {
		t.Fatalf("passed %v with %d mismatches, want 6 (5 half_plus_two, 1 linear_classifier)", rep.Passed(), rep.Mismatches)
	}
	r := row(t, rep, "half_plus_two", "outputs")
	// y = 0.5x+2 with x in [-1, 1]: y+0.25 in FP32 is 0.25 off within FP32's rounding near 2.
	if r.Mismatch != 5 || math.Abs(r.MaxAbs-0.25) > 1e-6 || r.MaxRel < 0.25/2.5 || r.MaxRel > 0.25/1.5+1e-6 || r.Abs.Total != 10 {
		t.Errorf("half_plus_two: %d mismatched, max abs %g, max rel %g, %d elements", r.Mismatch, r.MaxAbs, r.MaxRel, r.Abs.Total)
	}
	for _, out := range []string{"sum", "label_bytes", "argmax"} {
		if r := row(t, rep, "multi_out", out); r.Identical != 5 {
			t.Errorf("multi_out/%s (not perturbed): %d of 5 identical", out, r.Identical)
		}
	}
	sc := row(t, rep, "linear_classifier", "scores")
	if sc.Mismatch != 1 || sc.Top1Agree != 3 || sc.Top1Total != 3 || math.Abs(sc.Top1ScoreErr-0.01) > 1e-6 {
		t.Errorf("classifier scores: %d mismatched, top-1 %d/%d, score error %g", sc.Mismatch, sc.Top1Agree, sc.Top1Total, sc.Top1ScoreErr)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"half_plus_two outputs float 5 0 0 5 0.25", "linear_classifier scores float 1 0 0 1 0.01 0.01", "13 requests in"} {
		if !hasLine(table.String(), want) {
			t.Errorf("table lacks a line starting %q:\n%s", want, table.String())
		}
	}
}

// hasLine reports whether a line of text starts with the words of want,
// whatever the spaces between them.
func hasLine(text, want string) bool {
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.Join(strings.Fields(line), " "), want) {
			return true
		}
	}
	return false
}

// A tf: endpoint is used as it is; a v2: one gets an in-process tfsbridge
// that answers TF REST for it.
func TestEndpointStart(t *testing.T) {
	e, _ := ParseEndpoint("tf:http://tf-serving:8501/")
	base, stop, err := e.Start(context.Background(), nil, 0)
	if err != nil || base != "http://tf-serving:8501" {
		t.Fatalf("tf: Start = %q, %v", base, err)
	}
	stop()
	dead, _ := ParseEndpoint("v2:http://127.0.0.1:1")
	if _, _, err := dead.Start(context.Background(), nil, 0); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("a v2 server that is down: %v", err)
	}
	base = startTF(t, nil)
	reqs := []Request{{Model: "half_plus_two", Verb: "predict", Body: []byte(`{"instances": [1.0, 2.0]}`)}}
	rep, err := Run(context.Background(), reqs, Options{A: base, B: base}) // zero options take the defaults
	if err != nil || !rep.Passed() || row(t, rep, "half_plus_two", "predictions").Identical != 1 {
		t.Fatalf("Run against itself: %+v, %v", rep, err)
	}
}

// FP16 outputs (binary on the v2 wire) drift by the perturbation too.
func TestRunPerturbedFP16(t *testing.T) {
	base := startTF(t, nil)
	reqs, err := Generate(context.Background(), testClient, base, GenerateOptions{
		Models: []string{"FP16OutputModel"}, N: 2, Seed: 1, Batch: 1, MaxElements: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rep := runAgainst(t, reqs, map[string]float64{"FP16OutputModel": 0.5})
	for _, out := range []string{"fp16_output", "fp32_output"} {
		// Inputs in [-1, 1] with three decimals: FP16 keeps 0.5 off within its rounding there.
		if r := row(t, rep, "FP16OutputModel", out); r.Mismatch != 2 || math.Abs(r.MaxAbs-0.5) > 1e-3 {
			t.Errorf("%s: %d mismatched, max abs %g", out, r.Mismatch, r.MaxAbs)
		}
	}
}
