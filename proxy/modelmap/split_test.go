package modelmap

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

const splitMap = `
servers:
  tfs:  {url: "http://tf-serving:8501", kind: tfserving, grpc: "tf-serving:8500"}
  onnx: {url: "http://triton-onnx:8000", kind: v2}
models:
  mnist:
    split: {tfs: 90, onnx: 10}
    split_key: x-user-id
    model: mnist_onnx          # the v2 share's name
  iris:
    split: {default: 1, onnx: 3, tfs: 0}
  legacy:
    server: tfs
`

func TestParseSplit(t *testing.T) {
	m, err := Parse([]byte(splitMap))
	if err != nil {
		t.Fatal(err)
	}
	if s := m.Server("tfs"); !s.TFServing() || s.Kind != KindTFServing || s.GRPC != "tf-serving:8500" {
		t.Errorf("tfs = %+v", s)
	}
	if s := m.Server("onnx"); s.TFServing() || s.Kind != "auto" {
		t.Errorf("onnx = %+v (kind v2 is auto)", s)
	}
	var none *Server
	if none.TFServing() {
		t.Error("the default server is a v2 one")
	}
	mn := m.Model("mnist")
	want := &Split{Shares: []Share{{"onnx", 10}, {"tfs", 90}}, Key: "x-user-id", total: 100}
	if !reflect.DeepEqual(mn.Split, want) || mn.Server != "tfs" || mn.Default.Model != "mnist_onnx" {
		t.Errorf("mnist = split %+v server %q", mn.Split, mn.Server)
	}
	ir := m.Model("iris")
	if ir.Split.Key != "" || ir.Server != "onnx" || !reflect.DeepEqual(ir.Split.Servers(), []string{"default", "onnx", "tfs"}) {
		t.Errorf("iris = split %+v server %q", ir.Split, ir.Server)
	}
	if lg := m.Model("legacy"); lg.Split != nil || lg.Server != "tfs" {
		t.Errorf("legacy = %+v", lg)
	}
	if !reflect.DeepEqual(m.SplitKeys, []string{"x-user-id"}) {
		t.Errorf("SplitKeys = %q, want [x-user-id] (iris has no key)", m.SplitKeys)
	}
}

func TestParseSplitErrors(t *testing.T) {
	const servers = "servers:\n  tfs: {url: \"http://a:1\", kind: tfserving}\n  onnx: {url: \"http://b:1\"}\nmodels:\n  m:\n"
	for _, tc := range []struct {
		name, doc string
		line      int
		want      string
	}{
		{"undefined server", "    split: {tfs: 90, nope: 10}\n", 6, `models.m.split.nope: uses server "nope", which servers does not define`},
		{"negative weight", "    split: {tfs: 90, onnx: -1}\n", 6, `models.m.split.onnx: weight -1 is negative`},
		{"weight too large", "    split:\n      tfs: 90\n      onnx: 2000000\n", 8, `models.m.split.onnx: weight 2000000 is over 1000000`},
		{"fractional weight", "    split: {tfs: 0.9, onnx: 0.1}\n", 6, `models.m.split.tfs: want an integer, not "0.9"`},
		{"missing weight", "    split:\n      tfs:\n      onnx: 1\n", 7, `models.m.split.tfs: server "tfs" has no weight`},
		{"all zero", "    split: {tfs: 0, onnx: 0}\n", 6, `models.m.split: the weights add up to 0`},
		{"empty split", "    split: {}\n", 6, `models.m.split: the weights add up to 0`},
		{"split is a list", "    split: [tfs, onnx]\n", 6, `models.m.split: want a mapping, not a list`},
		{"server and split", "    server: onnx\n    split: {tfs: 1}\n", 6, `models.m.server: set server or split, not both`},
		{"key without split", "    split_key: x-user-id\n", 6, `models.m.split_key: split_key without split`},
		{"upper-case key", "    split: {tfs: 1}\n    split_key: X-User-Id\n", 7, `models.m.split_key: "X-User-Id": want a lower-case HTTP header name`},
		{"key with a space", "    split: {tfs: 1}\n    split_key: \"x user\"\n", 7, `models.m.split_key: "x user": want a lower-case HTTP header name`},
		{"pseudo-header key", "    split: {tfs: 1}\n    split_key: \":path\"\n", 7, `models.m.split_key: ":path": want`},
		{"empty key", "    split: {tfs: 1}\n    split_key: \"\"\n", 7, `models.m.split_key: "": want`},
		{"rename on a tfserving-only model", "    server: tfs\n    model: other\n", 7, `models.m.model: server "tfs" is a TF Serving server: its requests pass unchanged, so model`},
		{"labels on a tfserving-only model", "    server: tfs\n    labels: {stable: 1}\n", 7, `models.m.labels: server "tfs" is a TF Serving server`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(servers + tc.doc))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			want := fmt.Sprintf("line %d: %s", tc.line, tc.want)
			if e.Line != tc.line || !strings.HasPrefix(e.Error(), want) {
				t.Errorf("err = %q (line %d)\nwant %q", e.Error(), e.Line, want)
			}
		})
	}
}

// binomialBound is how far from n·p a count of n weighted draws may land:
// 4.5 standard deviations of the binomial, which a fair draw exceeds
// about once in 150,000 runs.
func binomialBound(n int, p float64) float64 { return 4.5 * math.Sqrt(float64(n)*p*(1-p)) }

func TestSplitPickWeights(t *testing.T) {
	s := &Split{Shares: []Share{{"onnx", 10}, {"off", 0}, {"tfs", 90}}, total: 100}
	const n = 20000
	for _, keyed := range []bool{false, true} {
		counts := map[string]int{}
		for i := range n {
			key := ""
			if keyed {
				key = fmt.Sprintf("user-%d", i)
			}
			counts[s.Pick(key)]++
		}
		if counts["off"] != 0 {
			t.Errorf("keyed %v: a zero weight got %d", keyed, counts["off"])
		}
		if d := math.Abs(float64(counts["onnx"]) - n*0.1); d > binomialBound(n, 0.1) {
			t.Errorf("keyed %v: onnx got %d of %d, want %d ± %.0f", keyed, counts["onnx"], n, n/10, binomialBound(n, 0.1))
		}
	}
}

func TestSplitPickSticky(t *testing.T) {
	before := &Split{Shares: []Share{{"onnx", 10}, {"tfs", 90}}, total: 100}
	after := &Split{Shares: []Share{{"onnx", 50}, {"tfs", 50}}, total: 100}
	moved := 0
	for i := range 5000 {
		key := fmt.Sprintf("user-%d", i)
		first := before.Pick(key)
		for range 3 {
			if again := before.Pick(key); again != first {
				t.Fatalf("%s: %s then %s", key, first, again)
			}
		}
		// Growing onnx's share keeps every key onnx had: only tfs keys move.
		switch now := after.Pick(key); {
		case first == "onnx" && now != "onnx":
			t.Fatalf("%s left onnx when its weight grew", key)
		case first != now:
			moved++
		}
	}
	if moved == 0 {
		t.Error("no key moved to onnx")
	}
}
