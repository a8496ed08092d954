package tfrequest

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/internal/oracle"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// sameRequest reports how two parsed requests differ ("" if not at all):
// format, signature, names, dtypes, shapes, and the data byte for byte
// (as Blocks gives it: a streamed body's data may lie in several blocks).
func sameRequest(a, b *Request) string {
	switch {
	case a.Format != b.Format:
		return "format " + a.Format.String() + " vs " + b.Format.String()
	case a.SignatureName != b.SignatureName:
		return "signature name " + a.SignatureName + " vs " + b.SignatureName
	case a.Signature != b.Signature:
		return "signature"
	case len(a.Inputs) != len(b.Inputs):
		return "input count"
	}
	for i := range a.Inputs {
		x, y := &a.Inputs[i], &b.Inputs[i]
		if x.Name != y.Name || x.DataType != y.DataType || !slices.Equal(x.Shape, y.Shape) ||
			!bytes.Equal(bytes.Join(a.Blocks(i), nil), bytes.Join(b.Blocks(i), nil)) || len(x.Strings) != len(y.Strings) {
			return "tensor " + render(a.Inputs[i:i+1]) + " vs " + render(b.Inputs[i:i+1])
		}
		for j := range x.Strings {
			if !bytes.Equal(x.Strings[j], y.Strings[j]) {
				return "string " + render(a.Inputs[i:i+1]) + " vs " + render(b.Inputs[i:i+1])
			}
		}
	}
	return ""
}

// checkOnePass asserts the one-decoder contract on one body: Parse (the
// body as one chunk) answers exactly as the tape oracle, tensors or error
// code and text, and so does the body cut at cuts and in every stream
// chunking, but for the bodies oracle.Undecidable lists, which a stream may
// answer with ErrUndecided.
func checkOnePass(t *testing.T, body []byte, sig *tensor.Signature, lim tensor.Limits, cuts []int) {
	t.Helper()
	exact, exErr := tapeParse(body, fixed(sig), lim)
	if exErr == nil {
		defer exact.Release()
	}
	whole, err := Parse(body, fixed(sig), lim)
	if sameAnswer(t, body, exact, exErr, whole, err, "whole body") {
		t.Fatalf("whole body undecided: %v", err)
	}
	chunked, err := streamCuts(body, fixed(sig), lim, cuts)
	if sameAnswer(t, body, exact, exErr, chunked, err, cuts) && !oracle.Undecidable(body, sig, lim) {
		t.Fatalf("cut at %v: undecided %v", cuts, err)
	}
	if checkStream(t, body, fixed(sig), lim) && !oracle.Undecidable(body, sig, lim) {
		t.Fatalf("streaming decoder: undecided")
	}
}

// onePassCases are valid and invalid bodies, common and rare
// (the decoder decides them all).
var onePassCases = []struct {
	name string
	sig  *tensor.Signature
	lim  tensor.Limits
	body string
}{
	{name: "row fp32", sig: sigOf("x:FP32"), body: `{"instances": [[1.5, 2], [3, 4e-3]]}`},
	{name: "row fp64 rank 3", sig: sigOf("x:FP64"), body: "{\"instances\":[[[1,2,3],[4,5,6]]]}\n"},
	{name: "named signature", sig: sigOf("x:INT32"), body: `{"signature_name": "serving_default", "instances": [1, 2, -3]}`},
	{name: "signature after data, empty", sig: sigOf("x:INT32"), body: `{"instances": [1], "signature_name": ""}`},
	{name: "signature after data", sig: sigOf("x:INT32"), body: `{"instances": [1], "signature_name": "other"}`},
	{name: "columnar named", sig: sigOf("a:INT64", "b:BYTES"), body: `{"inputs": {"b": ["x", "yz"], "a": [[1, 2]]}}`},
	{name: "columnar plain", sig: sigOf("x:FP32"), body: `{"inputs": [[1, 2], [3, 4]]}`},
	{name: "columnar scalar", sig: sigOf("x:FP32"), body: `{"inputs": 3.5}`},
	{name: "columnar b64 value", sig: sigOf("s:BYTES"), body: `{"inputs": {"s": [{"b64": "aGk="}, {"b64": "eW8"}]}}`},
	{name: "columnar bare b64", sig: sigOf("s:BYTES"), body: `{"inputs": {"b64": "aGk="}}`},
	{name: "columnar dup and unknown", sig: sigOf("a:FP32"), body: `{"inputs": {"a": [1], "zz": {"q": [1, "x", null]}, "a": 7}}`},
	{name: "row objects", sig: sigOf("a:FP32", "b:BYTES"), body: `{"instances": [{"a": [1, 2], "b": {"b64": "aGk="}}, {"b": {"b64": "eW8="}, "a": [3, 4]}]}`},
	{name: "row b64 values", sig: sigOf("s:BYTES"), body: `{"instances": [{"b64": "aGk="}, {"b64": " eW 8= "}]}`},
	{name: "row strings", sig: sigOf("s:BYTES"), body: `{"instances": ["a", "", "é"]}`},
	{name: "row bools", sig: sigOf("b:BOOL"), body: `{"instances": [[true, false], [false, true]]}`},
	{name: "specials fp32", sig: sigOf("x:FP32"), body: "\xEF\xBB\xBF {\"instances\": [NaN, -Infinity, Infinity, -Inf, -0.0, 1e-400, 1.7976931348623157e308]}"},
	{name: "specials fp64", sig: sigOf("x:FP64"), body: `{"instances": [NaN, -Infinity, -0, 0.12345678901234567, 123456789012345678901234567890, 2.2250738585072014e-308, 4.9e-324]}`},
	{name: "empty items", sig: sigOf("x:FP32"), body: `{"instances": [[], []]}`},
	{name: "empty nested", sig: sigOf("x:FP32"), body: `{"inputs": [[[], []], [[], []]]}`},
	{name: "int narrowing", sig: sigOf("a:INT8", "b:UINT8", "c:INT16", "d:UINT16", "e:UINT32", "f:UINT64", "g:FP16", "h:BF16"),
		body: `{"inputs": {"a": [300, -1], "b": [256, -2], "c": [70000, 3], "d": [70000, 4], "e": [4294967295, 5], "f": [18446744073709551615, 6], "g": [1.5, 70000], "h": [1.5, -3e38]}}`},
	{name: "other keys skipped", sig: sigOf("x:FP32"), body: `{"foo": {"bar": [1, "x", null, {"a": true}, []]}, "instances": [1], "z": -2.5e3}`},
	{name: "trailing content", sig: sigOf("x:FP32"), body: `{"instances": [1]} garbage [`},
	{name: "duplicate instances", sig: sigOf("x:FP32"), body: `{"instances": [1], "instances": "zz"}`},

	// Valid rarities, decided too.
	{name: "escape", sig: sigOf("s:BYTES"), body: `{"instances": ["a\nb", "\u00e9\ud83d\ude00\"\\\/\b\f\r\t", "\udc00x"]}`},
	{name: "bad surrogate", sig: sigOf("s:BYTES"), body: `{"instances": ["\ud800x"]}`},
	{name: "escaped key", sig: sigOf("x:FP32"), body: `{"instan\u0063es": [1]}`},
	{name: "duplicated instance key", sig: sigOf("a:FP32"), body: `{"instances": [{"a": 1, "a": 2}, {"a": 3}]}`},
	{name: "NUL-cut instance keys", sig: sigOf("a:FP32", "b:FP32"), body: `{"instances": [{"a\u0000x": [1], "b": [2], "a": [3]}]}`},
	// The input count check refuses it.
	{name: "first b64 with several inputs", sig: sigOf("a:BYTES", "b:BYTES"), body: `{"instances": [{"b64": "aGk="}]}`},
	// Errors.
	{name: "empty body", sig: sigOf("x:FP32"), body: ``},
	{name: "blank", sig: sigOf("x:FP32"), body: "  \n"},
	{name: "not object", sig: sigOf("x:FP32"), body: `[1, 2]`},
	{name: "unterminated", sig: sigOf("x:FP32"), body: `{"instances": [1]`},
	{name: "trailing comma", sig: sigOf("x:FP32"), body: `{"instances": [1,]}`},
	{name: "missing comma", sig: sigOf("x:FP32"), body: `{"instances": [1 2]}`},
	{name: "NUL", sig: sigOf("x:FP32"), body: "{\"instances\": [1\x00]}"},
	{name: "number glued", sig: sigOf("x:FP32"), body: `{"instances": [1x]}`},
	{name: "bad literal", sig: sigOf("b:BOOL"), body: `{"instances": [tru]}`},
	{name: "too big", sig: sigOf("x:FP64"), body: `{"instances": [1e400]}`},
	{name: "Infinit", sig: sigOf("x:FP64"), body: `{"instances": [Infinit]}`},
	{name: "ragged", sig: sigOf("x:FP32"), body: `{"instances": [[1, 2], [3]]}`},
	{name: "ragged deep", sig: sigOf("x:FP32"), body: `{"inputs": [[[1], [2]], [[3], 4]]}`},
	{name: "scalar above leaves", sig: sigOf("x:FP32"), body: `{"inputs": [[1, 2], 3]}`},
	{name: "list below leaves", sig: sigOf("x:FP32"), body: `{"inputs": [1, [2]]}`},
	{name: "empty then full", sig: sigOf("x:FP32"), body: `{"inputs": [[], [1]]}`},
	{name: "item shape", sig: sigOf("x:FP32"), body: `{"instances": [[1, 2], [[3, 4]]]}`},
	{name: "type", sig: sigOf("x:FP32"), body: `{"instances": ["a"]}`},
	{name: "int from decimal", sig: sigOf("x:INT32"), body: `{"instances": [1.0]}`},
	{name: "int32 range", sig: sigOf("x:INT32"), body: `{"instances": [2147483648]}`},
	{name: "null", sig: sigOf("x:FP32"), body: `{"instances": [null]}`},
	{name: "object leaf", sig: sigOf("x:FP32"), body: `{"instances": [{"b64": "aGk="}]}`},
	{name: "bad b64", sig: sigOf("s:BYTES"), body: `{"instances": [{"b64": "!!"}]}`},
	{name: "b64 two members", sig: sigOf("s:BYTES"), body: `{"inputs": [{"b64": "aGk=", "x": 1}]}`},
	{name: "empty instances", sig: sigOf("x:FP32"), body: `{"instances": []}`},
	{name: "instances not list", sig: sigOf("x:FP32"), body: `{"instances": 1}`},
	{name: "both keys", sig: sigOf("x:FP32"), body: `{"instances": [1], "inputs": [1]}`},
	{name: "no key", sig: sigOf("x:FP32"), body: `{"x": [1]}`},
	{name: "signature not string", sig: sigOf("x:FP32"), body: `{"signature_name": 1, "instances": [1]}`},
	{name: "plain list, several inputs", sig: sigOf("a:FP32", "b:FP32"), body: `{"instances": [[1]]}`},
	{name: "object then list", sig: sigOf("a:FP32"), body: `{"instances": [{"a": 1}, [2]]}`},
	{name: "list then object", sig: sigOf("a:FP32"), body: `{"instances": [[1], {"a": 2}]}`},
	{name: "unknown input", sig: sigOf("a:FP32"), body: `{"instances": [{"b": 1}]}`},
	{name: "missing input", sig: sigOf("a:FP32", "b:FP32"), body: `{"instances": [{"a": 1}]}`},
	{name: "empty instance object", sig: sigOf("a:FP32"), body: `{"instances": [{}]}`},
	{name: "columnar missing", sig: sigOf("a:FP32", "b:FP32"), body: `{"inputs": {"a": [1]}}`},
	{name: "element limit", sig: sigOf("x:FP32"), lim: tensor.Limits{MaxElements: 4}, body: `{"instances": [1, 2, 3, 4, 5]}`},
	{name: "element limit exact", sig: sigOf("x:FP32"), lim: tensor.Limits{MaxElements: 4}, body: `{"instances": [1, 2, 3, 4]}`},
	{name: "depth limit", sig: sigOf("x:FP32"), lim: tensor.Limits{MaxDepth: 3}, body: `{"instances": [[[1]]]}`},
	{name: "depth limit exact", sig: sigOf("x:FP32"), lim: tensor.Limits{MaxDepth: 3}, body: `{"instances": [[1]]}`},
	{name: "node limit", sig: sigOf("x:FP32"), lim: tensor.Limits{MaxElements: 1}, body: `{"z": [` + strings.Repeat("0,", 1<<16) + `0], "instances": [1]}`},
	// Rows of sibling lists, which the decimal loop steps over itself.
	{name: "rows", sig: sigOf("x:FP32"), body: `{"instances": [[[0.5, 0.25, 0.125], [0.1234567, -2.5, 7],[0.8444218515250481,0.1,3], ` +
		`[0.08444218515250481, 1, 2]], [[1, 2, 3], [4, 5, 6], [7, 8, 9], [0.5, 0.5, 0.5]]]}`},
	{name: "rows at the element limit", sig: sigOf("x:FP64"), lim: tensor.Limits{MaxElements: 12},
		body: `{"instances": [[[0.5, 0.25, 0.125], [0.5, 0.25, 0.125], [0.5, 0.25, 0.125], [0.5, 0.25, 0.125]]]}`},
	{name: "rows over the element limit", sig: sigOf("x:FP32"), lim: tensor.Limits{MaxElements: 11},
		body: `{"instances": [[[0.5, 0.25, 0.125], [0.5, 0.25, 0.125], [0.5, 0.25, 0.125], [0.5, 0.25, 0.125]]]}`},
	{name: "ragged rows", sig: sigOf("x:FP32"),
		body: `{"instances": [[[0.5, 0.25, 0.125], [0.5, 0.25], [0.5, 0.25, 0.125], [0.5, 0.25, 0.125, 1]]]}`},
	{name: "rows spaced", sig: sigOf("x:FP32"),
		body: `{"instances": [[[0.5, 0.25, 0.125] ,[0.5, 0.25, 0.125],` + "\n  " + `[0.5, 1e-3, 0.125], [0.5, 0.25, 0.125]]]}`},
}

// TestOnePass checks each case at every cut into two chunks, in one-byte
// chunks, and whole, against the tape oracle.
func TestOnePass(t *testing.T) {
	for _, tc := range onePassCases {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			var ones []int
			for i := 1; i < len(body) && len(body) < 4096; i++ {
				ones = append(ones, i)
			}
			checkOnePass(t, body, tc.sig, tc.lim, ones)
			for i := 0; i <= len(body) && len(body) < 4096; i++ {
				checkOnePass(t, body, tc.sig, tc.lim, []int{i})
			}
		})
	}
}

// TestOnePassResolvesOnce: a body the decoder decides asks the resolver
// once, with the name TF would use.
func TestOnePassResolvesOnce(t *testing.T) {
	sig := sigOf("x:FP32")
	for _, tc := range []struct{ body, name string }{
		{`{"signature_name": "s", "instances": [1]}`, "s"},
		{`{"instances": [1]}`, ""},
	} {
		var names []string
		req, err := Parse([]byte(tc.body), func(name string) (*tensor.Signature, error) {
			names = append(names, name)
			return sig, nil
		}, tensor.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		req.Release()
		if !slices.Equal(names, []string{tc.name}) {
			t.Errorf("%s: resolver called with %q, want [%q]", tc.body, names, tc.name)
		}
	}
}

// TestOnePassLargeChunked runs a large row body through random chunkings.
func TestOnePassLargeChunked(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"instances": [`)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 300 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("[")
		for j := range 7 {
			if j > 0 {
				b.WriteString(",")
			}
			b.WriteString([]string{"0.1234567", "-1e-7", "12345678901234567890", "NaN", "-Infinity", "3"}[r.IntN(6)])
		}
		b.WriteString("]")
	}
	b.WriteString("]}")
	body := []byte(b.String())
	for _, dt := range []string{"x:FP32", "x:FP64"} {
		for range 20 {
			checkOnePass(t, body, sigOf(dt), tensor.Limits{}, randomCuts(r, len(body)))
		}
	}
}

// randomCuts returns sorted chunk boundaries in [0, n]: short and long
// chunks, empty ones included.
func randomCuts(r *rand.Rand, n int) []int {
	var cuts []int
	for p := 0; p < n; {
		p += r.IntN(1 + []int{1, 4, 64, 4096}[r.IntN(4)])
		cuts = append(cuts, min(p, n))
	}
	return cuts
}

// FuzzOnePass feeds random bodies in random chunkings to checkOnePass:
// Parse (the body as one chunk) and every chunking answer exactly as the
// tape oracle (tensors or error text), but for the bodies a stream may
// leave undecided (oracle.Undecidable).
func FuzzOnePass(f *testing.F) {
	for _, tc := range onePassCases {
		if len(tc.body) < 4096 {
			f.Add([]byte(tc.body), uint8(0), uint64(1))
		}
	}
	sigs := []*tensor.Signature{
		sigOf("x:FP32"),
		sigOf("a:INT32", "s:BYTES"),
		sigOf("a:INT8", "s:BYTES", "h:FP16", "b:BOOL", "u:UINT64", "d:FP64", "w:BF16", "v:UINT16"),
		sigOf("s:BYTES"),
		sigOf("x:FP64"),
		sigOf("b64:BYTES", "a:FP32"), // what a stream cannot tell: second.go
		sigOf("a:FP32", "b:FP32"),
	}
	for i, s := range []string{
		`{"instances": [{"a": [1, 2], "s": {"b64": "aGk="}}, {"s": "x", "a": [3, 4]}]}`,
		`{"inputs": {"a": [[1], [2]], "s": ["x"], "h": 1.5, "b": true, "u": [1], "d": [NaN], "w": [2], "v": [3]}}`,
		`{"instances": [{"b64": "aGk="}, {"b64": "eW8="}]}`,
		`{"signature_name": "x", "inputs": [NaN, -Infinity, 1e308, 0.30000000000000004]}`,
		`{"inputs": {"b64": "aGk=", "a": [1]}}`,
		`{"instances": [{"b64": "x", "a": 1}, {"b64": "aGk="}]}`,
		`{"inputs": {"b": [1, "x", 3, 4, 5], "a": [1, 2, 3]}}`,
	} {
		f.Add([]byte(s), uint8(i+1), uint64(i))
	}
	f.Fuzz(func(t *testing.T, body []byte, sel uint8, seed uint64) {
		sig := sigs[int(sel)%len(sigs)]
		lim := tensor.Limits{MaxDepth: 16, MaxElements: 1 << 12}
		if seed%2 == 0 {
			lim.MaxElements = 4 // named inputs over the limit together: second.go
		}
		r := rand.New(rand.NewPCG(seed, seed>>32))
		checkOnePass(t, body, sig, lim, randomCuts(r, len(body)))
	})
}
