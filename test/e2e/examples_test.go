package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/test/conformance"
)

// The README's classify and regress examples (and "tfsbridge demo"'s):
// integer features, whose serialized tf.Examples are plain ASCII, so that
// KServe (which decodes BYTES inputs as UTF-8 text) can take them too.
const (
	readmeClassifyBody     = `{"examples": [{"x": 0}, {"x": 2}]}`
	readmeClassifyResponse = "{\n    \"results\": [[[\"negative\", 0.5], [\"positive\", 0.5]], [[\"negative\", 0.119202919], [\"positive\", 0.880797088]]\n    ]\n}"
	readmeRegressBody      = `{"context": {"w": 3}, "examples": [{"x": 1}, {"x": 2}]}`
	readmeRegressResponse  = "{\n    \"results\": [5.0, 8.0]\n}"
)

// kserveUTF8 is tfsbridge's refusal of a non-UTF-8 BYTES input for KServe:
// serialized examples with float features are binary.
var kserveUTF8 = fail(400, "input 'inputs' holds a string that is not valid UTF-8; the KServe server decodes BYTES tensors as UTF-8 text and cannot accept it")

// examplesCases are the :classify and :regress rows of the shared table:
// real tf.Example round trips, the mock's models parsing what tfsbridge
// serialized.
var examplesCases = []tcase{
	{
		name: "readme classify",
		req:  request{path: "/v1/models/linear_classifier:classify", body: readmeClassifyBody},
		want: ok(readmeClassifyResponse),
	},
	{
		name: "readme regress, context merged",
		req:  request{path: "/v1/models/linear_regressor:regress", body: readmeRegressBody},
		want: ok(readmeRegressResponse),
	},
	{
		name: "regress: an example feature replaces the context's",
		req:  request{path: "/v1/models/linear_regressor:regress", body: `{"context": {"x": 1, "b": 10}, "examples": [{"x": 2}, {}, {"b": 0}]}`},
		want: ok("{\n    \"results\": [11.0, 10.5, 0.5]\n}"),
	},
	{
		name: "regress with float features",
		req:  request{path: "/v1/models/linear_regressor:regress", body: `{"signature_name": "serving_default", "examples": [{"x": [1.5, 9.0]}, {"x": 0.1, "w": -1.0}]}`},
		want: ok("{\n    \"results\": [2.75, 1.9]\n}"),
		per:  map[string]expect{kserve: kserveUTF8},
	},
	{
		name: "classify with labels and scores from the examples",
		req:  request{path: "/v1/models/linear_classifier:classify", body: `{"examples": [{"labels": ["a\"b", "\u00e9"], "scores": [0.25, NaN]}]}`},
		want: ok("{\n    \"results\": [[[\"a\\\"b\", 0.25], [\"é\", NaN]]\n    ]\n}"),
		per:  map[string]expect{kserve: kserveUTF8},
	},
	{
		name: "classify a version",
		req:  request{path: "/v1/models/linear_classifier/versions/1:classify", body: readmeClassifyBody},
		want: ok(readmeClassifyResponse),
		per:  map[string]expect{kserve: fail(501, "Model versioning not supported yet.")},
	},
	{
		name: "classify: the model refuses an example without x",
		req:  request{path: "/v1/models/linear_classifier:classify", body: `{"examples": [{"x": 1}, {"y": 1}]}`},
		want: fail(400, "example 1 has no numeric feature 'x'"),
	},
	{
		name: "classify: unknown signature",
		req:  request{path: "/v1/models/linear_classifier:classify", body: `{"signature_name": "foo", "examples": [{"x": 1}]}`},
		want: fail(400, "No signature was found with the name: foo"),
	},
	{
		name: "regress on a classifier",
		req:  request{path: "/v1/models/linear_classifier:regress", body: readmeRegressBody},
		want: fail(400, "Expected regression signature method_name to be tensorflow/serving/regress. Was: tensorflow/serving/classify"),
	},
	{
		name: "classify: request errors before the model lookup",
		req:  request{path: "/v1/models/no_such_model:classify", body: `{"examples": [{"x": [1, 2.0]}]}`},
		want: fail(400, "Unexpected element type in feature: x expecting type: int64"),
	},
	{
		// 2000 copies of a 40 KB context would be an 80 MB v2 body from a
		// 48 KB request: refused before a copy is made.
		name: "regress: a context multiplied past the body limit",
		req: request{path: "/v1/models/linear_regressor:regress",
			body: `{"context": {"pad": "` + strings.Repeat("a", 40<<10) + `"}, "examples": [` + strings.Repeat(`{"x": 1}, `, 1999) + `{"x": 1}]}`},
		want: fail(413, "Request examples serialize to more than 67108864 bytes, the limit of this server"),
	},
	{
		name: "classify: unknown model",
		req:  request{path: "/v1/models/no_such_model:classify", body: readmeClassifyBody},
		want: fail(404, "Servable not found for request: Latest(no_such_model)"),
	},
}

// TestConformanceExamples replays the classify and regress vectors of the
// shared conformance file through both transports against every kind of
// v2 server: request vectors as the errors the client gets (before any
// model runs), response vectors as the exact body for examples that make
// the mock's models return the vector's outputs.
func TestConformanceExamples(t *testing.T) {
	type vector struct {
		id   string
		req  request
		want func(kind string) (expect, string) // the answer, or a substring of the TF error
	}
	var vectors []vector
	for _, c := range conformance.MustLoad(t, "tfserving_cases.json") {
		if !strings.Contains(c.ID, "classif") && !strings.Contains(c.ID, "regress") {
			continue
		}
		var in struct {
			Method               string                `json:"method"`
			JSON                 string                `json:"json"`
			ClassificationResult [][][]json.RawMessage `json:"classification_result"`
			RegressionResult     []json.RawMessage     `json:"regression_result"`
		}
		var exp struct {
			JSONText string `json:"json_text"`
			Error    *struct {
				HTTPStatus       int    `json:"http_status"`
				MessageSubstring string `json:"message_substring"`
				Message          string `json:"message"`
			} `json:"error"`
		}
		conformance.Decode(t, c.Input, &in)
		conformance.Decode(t, c.Expected, &exp)
		switch {
		case c.Direction == "request":
			e := exp.Error
			for _, verb := range []string{"classify", "regress"} {
				if !strings.Contains(in.Method, verb) {
					continue
				}
				model := map[string]string{"classify": "linear_classifier", "regress": "linear_regressor"}[verb]
				vectors = append(vectors, vector{c.ID + "/" + verb, request{path: "/v1/models/" + model + ":" + verb, body: in.JSON},
					func(string) (expect, string) {
						if e.Message != "" {
							return fail(e.HTTPStatus, e.Message), ""
						}
						return expect{status: e.HTTPStatus}, e.MessageSubstring
					}})
			}
		case in.ClassificationResult != nil:
			// Each example carries its labels and scores as features.
			var examples []string
			for _, ex := range in.ClassificationResult {
				var labels, scores []string
				for _, pair := range ex {
					labels, scores = append(labels, string(pair[0])), append(scores, jsonNumber(pair[1]))
				}
				examples = append(examples, `{"labels": [`+strings.Join(labels, ", ")+`], "scores": [`+strings.Join(scores, ", ")+`]}`)
			}
			vectors = append(vectors, vector{c.ID, request{path: "/v1/models/linear_classifier:classify",
				body: `{"examples": [` + strings.Join(examples, ", ") + `]}`}, examplesAnswer(exp.JSONText)})
		case in.RegressionResult != nil:
			// outputs = w·x + b with x = 0: the value is b.
			var examples []string
			for _, v := range in.RegressionResult {
				examples = append(examples, `{"x": 0, "b": `+jsonNumber(v)+`}`)
			}
			vectors = append(vectors, vector{c.ID, request{path: "/v1/models/linear_regressor:regress",
				body: `{"examples": [` + strings.Join(examples, ", ") + `]}`}, examplesAnswer(exp.JSONText)})
		default:
			// resp-err-empty-classification: a request always has an
			// example (an empty list is refused first), so only the
			// writer can see an empty result; tfresponse tests it.
			t.Logf("%s: not reachable end to end", c.ID)
		}
	}
	if len(vectors) < 5 {
		t.Fatalf("only %d classify/regress vectors", len(vectors))
	}
	for _, kind := range []string{triton, kserve, mlserver} {
		t.Run(kind, func(t *testing.T) {
			s := newStack(t, stackConfig{Kind: kind})
			for _, via := range transports {
				t.Run(via, func(t *testing.T) {
					for _, v := range vectors {
						t.Run(v.id, func(t *testing.T) {
							want, substring := v.want(kind)
							s.skipExternal(t, v.req)
							got := s.do(t, via, v.req)
							if substring == "" {
								checkResponse(t, got, want)
								return
							}
							if got.status != want.status || !strings.Contains(string(got.body), substring) {
								t.Errorf("got %d %q, want %d with %q", got.status, got.body, want.status, substring)
							}
						})
					}
				})
			}
		})
	}
}

// examplesAnswer expects body, except on KServe (float features are not
// UTF-8) and on MLServer, which writes NaN and ±Infinity alike as null:
// tfsbridge reads null as NaN, so infinities come back as NaN there.
func examplesAnswer(body string) func(kind string) (expect, string) {
	return func(kind string) (expect, string) {
		switch kind {
		case kserve:
			return kserveUTF8, ""
		case mlserver:
			return ok(strings.NewReplacer("-Infinity", "NaN", "Infinity", "NaN").Replace(body)), ""
		}
		return ok(body), ""
	}
}

// jsonNumber is a vector's float value as a TF JSON token ("NaN",
// "Infinity" and "-Infinity" are bare tokens there).
func jsonNumber(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// readmeExamples returns the POST requests of README.md's shell examples
// ("$ curl -d '<body>' -X POST http://localhost:8501<path>") with the
// output the README shows under each.
func readmeExamples(t *testing.T) []tcase {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(projectRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	curl := regexp.MustCompile(`^\$ curl -d '([^']*)' -X POST http://localhost:8501(\S+)$`)
	var cases []tcase
	lines := strings.Split(string(text), "\n")
	for i := 0; i < len(lines); i++ {
		m := curl.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		var out []string
		for i++; i < len(lines) && lines[i] != "```" && !strings.HasPrefix(lines[i], "$ "); i++ {
			out = append(out, lines[i])
		}
		i--
		cases = append(cases, tcase{name: m[2], req: request{path: m[2], body: m[1]}, want: ok(strings.Join(out, "\n"))})
	}
	return cases
}

// projectRoot is the folder holding go.mod.
func projectRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := wd; filepath.Dir(d) != d; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	t.Fatalf("no go.mod above %s", wd)
	return ""
}

// TestReadmeExamples sends every curl example of the README (predict,
// classify, regress) through both transports to every kind of v2 server
// and expects exactly the output the README shows.
func TestReadmeExamples(t *testing.T) {
	cases := readmeExamples(t)
	var verbs []string
	for _, c := range cases {
		verbs = append(verbs, c.req.path[strings.LastIndexByte(c.req.path, ':')+1:])
	}
	for _, verb := range []string{"predict", "classify", "regress"} {
		if !slices.Contains(verbs, verb) {
			t.Fatalf("the README shows no :%s example (found %v)", verb, verbs)
		}
	}
	for _, kind := range []string{triton, kserve, mlserver} {
		t.Run(kind, func(t *testing.T) {
			s := newStack(t, stackConfig{Kind: kind})
			for _, via := range transports {
				for _, c := range cases {
					t.Run(via+c.name, func(t *testing.T) { s.runCase(t, via, c) })
				}
			}
		})
	}
}
