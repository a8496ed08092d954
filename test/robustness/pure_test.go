package robustness

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/internal/racebuild"
	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// The allocation bounds below are derived from the data structures, not
// fitted to measurements:
//   - request parsing keeps a 24-byte tape node per JSON value and a
//     value costs at least 2 body bytes ("0,"), so the tape is at most
//     12× the body, reserved before parsing (so a syntax error late in a
//     big body costs it too); strings add a 24-byte slice header per element (3 body
//     bytes at least: `"",`), base64 ones a small decode buffer, and the
//     v2 body is at most the tensors plus 4 bytes per string. Hence
//     requestBound.
//   - error paths only copy a bounded prefix of the input (dumps stop at
//     the token that crosses 256 bytes, so at most one long string or key
//     beyond it, never longer escaped than in the body) or the offending
//     key or path, which TF's texts may name twice ("key: K … named
//     input: K"), plus the message's own building: errorBound.
//   - response decoding aliases the body; it allocates one tensor header
//     per output and, for JSON data, the elements (8 bytes at most for a
//     value that costs 2 body bytes); the TF body is bounded by
//     tfresponse's budget. Hence responseBound.
var (
	requestBound  = bound{PerByte: 32, Fixed: 64 << 10}
	errorBound    = bound{PerByte: 8, Fixed: 64 << 10}
	responseBound = bound{PerByte: 48, Fixed: 64 << 10}
)

// Signatures the hostile requests are parsed against.
var (
	sigFloat = &tensor.Signature{Model: "m", Batched: true,
		Inputs:  []tensor.Spec{{Name: "x", DataType: tensor.FP32, Shape: []int64{-1}}},
		Outputs: []tensor.Spec{{Name: "y", DataType: tensor.FP32, Shape: []int64{-1}}}}
	sigInt = &tensor.Signature{Model: "m", Batched: true,
		Inputs:  []tensor.Spec{{Name: "x", DataType: tensor.Int64, Shape: []int64{-1}}},
		Outputs: []tensor.Spec{{Name: "y", DataType: tensor.Int64, Shape: []int64{-1}}}}
	sigBytes = &tensor.Signature{Model: "m", Batched: true,
		Inputs:  []tensor.Spec{{Name: "s", DataType: tensor.Bytes, Shape: []int64{-1}}},
		Outputs: []tensor.Spec{{Name: "s_bytes", DataType: tensor.Bytes, Shape: []int64{-1}}}}
	sigMulti = &tensor.Signature{Model: "m", Batched: true,
		Inputs: []tensor.Spec{{Name: "a", DataType: tensor.FP32, Shape: []int64{-1}},
			{Name: "b", DataType: tensor.Bytes, Shape: []int64{-1}}},
		Outputs: []tensor.Spec{{Name: "y", DataType: tensor.FP32, Shape: []int64{-1}}}}
)

// predictPipeline is the predict translation the hostile bodies go through.
var predictPipeline, _ = translate.For(route.Predict)

func resolverFor(sig *tensor.Signature) tfrequest.Resolver {
	return func(string) (*tensor.Signature, error) { return sig, nil }
}

// list returns `[e,e,…,e]` with n copies of e.
func list(e string, n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(e+",", n), ",") + "]"
}

// requestCase is one hostile TF request body.
type requestCase struct {
	name string
	body string
	sig  *tensor.Signature
	kind oip.ServerKind
	lim  tensor.Limits
	// status 0 means the body is one TF Serving accepts; shape is then the
	// first v2 input's expected shape.
	status int
	prefix string
	shape  []int64
	alloc  bound
}

func requestCases() []requestCase {
	const million = 1_000_000
	deep := strings.Repeat("[", 100_000)
	digits := strings.Repeat("9", 100_000)
	return []requestCase{
		{name: "10^5 nested arrays", body: `{"instances":` + deep, sig: sigFloat,
			status: 400, prefix: "JSON Parse error: Document nests deeper than the limit. at offset: 112", alloc: requestBound},
		{name: "10^5 nested objects", body: strings.Repeat(`{"a":`, 100_000), sig: sigFloat,
			status: 400, prefix: "JSON Parse error: Document nests deeper than the limit. at offset: 500", alloc: requestBound},
		{name: "nesting 99 deep, within the limit", body: `{"inputs":` + strings.Repeat("[", 99) + strings.Repeat("]", 99) + "}", sig: sigFloat,
			status: 0, shape: append(onesShape(98), 0), alloc: requestBound},
		{name: "10^6 empty b64 strings", body: `{"instances":` + list(`{"b64":""}`, million) + `}`, sig: sigBytes,
			shape: []int64{million}, alloc: requestBound},
		{name: "10^6 empty strings", body: `{"instances":` + list(`""`, million) + `}`, sig: sigBytes,
			shape: []int64{million}, alloc: requestBound},
		{name: "10^6 empty strings to MLServer (JSON)", body: `{"instances":` + list(`""`, million) + `}`, sig: sigBytes, kind: oip.MLServer,
			shape: []int64{million}, alloc: requestBound},
		{name: "10^6 zero-size instances", body: `{"instances":` + list(`[]`, million) + `}`, sig: sigFloat,
			shape: []int64{million, 0}, alloc: requestBound},
		{name: "10^6 zeros over the element limit", body: `{"instances":` + list("0", million) + `}`, sig: sigFloat,
			lim: tensor.Limits{MaxElements: 1000}, status: 400, prefix: "JSON Parse error: Document holds more values than the limit. at offset: ", alloc: errorBound},
		{name: "10^4 zeros over the element limit", body: `{"instances":` + list("0", 10_000) + `}`, sig: sigFloat,
			lim: tensor.Limits{MaxElements: 1000}, status: 400, prefix: "Failed to process element: 1000 of 'instances' list. Error: INVALID_ARGUMENT: Request holds more than 1000 tensor elements", alloc: requestBound},
		{name: "10^4 zeros, columnar, over the element limit", body: `{"inputs":` + list("0", 10_000) + `}`, sig: sigFloat,
			lim: tensor.Limits{MaxElements: 1000}, status: 400, prefix: "Request holds more than 1000 tensor elements", alloc: requestBound},
		{name: "1e999999", body: `{"instances":[1e999999]}`, sig: sigFloat,
			status: 400, prefix: "JSON Parse error: Number too big to be stored in double. at offset: 14", alloc: errorBound},
		{name: "10^5-digit integer", body: `{"instances":[` + digits + `]}`, sig: sigInt,
			status: 400, prefix: "JSON Parse error: Number too big to be stored in double. at offset: 14", alloc: errorBound},
		{name: "10^5-digit fraction", body: `{"instances":[0.` + digits + `]}`, sig: sigFloat,
			shape: []int64{1}, alloc: requestBound},
		{name: "10^5-digit negative exponent is 0", body: `{"instances":[1e-` + digits + `]}`, sig: sigFloat,
			shape: []int64{1}, alloc: requestBound},
		{name: "invalid UTF-8 string to Triton", body: "{\"instances\":[\"\xff\xfe\xc0\"]}", sig: sigBytes,
			shape: []int64{1}, alloc: requestBound},
		{name: "invalid UTF-8 string to KServe", body: "{\"instances\":[\"\xff\xfe\xc0\"]}", sig: sigBytes, kind: oip.KServe,
			status: 400, prefix: "input 's' holds a string that is not valid UTF-8", alloc: errorBound},
		{name: "invalid UTF-8 key", body: "{\"instances\":[{\"\xff\":1}]}", sig: sigMulti,
			status: 400, prefix: "Failed to process element: 0 key: \xff of 'instances' list. Error: INVALID_ARGUMENT: JSON object: does not have named input: \xff", alloc: errorBound},
		{name: "1 MiB key", body: `{"instances":[{"` + strings.Repeat("k", 1<<20) + `":1}]}`, sig: sigMulti,
			status: 400, prefix: "Failed to process element: 0 key: kkkk", alloc: errorBound},
		{name: "1 MiB string in a type error", body: `{"instances":["` + strings.Repeat("s", 1<<20) + `"]}`, sig: sigFloat,
			status: 400, prefix: "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: \"ssss", alloc: errorBound},
		{name: "1 MiB of escapes in a type error", body: `{"instances":["` + strings.Repeat(`\u0001\"`, 1<<17) + `"]}`, sig: sigFloat,
			status: 400, prefix: "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: \"\\u0001\\\"", alloc: errorBound},
		{name: "NUL ends the document", body: "{\"instances\":[1.5]}\x00\xff{{{", sig: sigFloat,
			shape: []int64{1}, alloc: requestBound},
		{name: "NUL inside a key", body: "{\"inst\x00ances\":[1]}", sig: sigFloat,
			status: 400, prefix: "JSON Parse error: Missing a closing quotation mark in string. at offset: 6", alloc: errorBound},
		{name: "NUL escaped in a string", body: `{"instances":["a\u0000b"]}`, sig: sigBytes,
			shape: []int64{1}, alloc: requestBound},
		{name: "BOM then body", body: "\xef\xbb\xbf{\"instances\":[1]}", sig: sigFloat,
			shape: []int64{1}, alloc: requestBound},
		{name: "BOM only", body: "\xef\xbb\xbf", sig: sigFloat,
			status: 400, prefix: "JSON Parse error: The document is empty. at offset: 3", alloc: errorBound},
		{name: "duplicate instances: the first wins", body: `{"instances":[1,2],"instances":["x"]}`, sig: sigFloat,
			shape: []int64{2}, alloc: requestBound},
		{name: "10^5 duplicate keys in one instance", body: `{"instances":[{` + strings.Repeat(`"a":1,`, 100_000) + `"b":"x"}]}`, sig: sigMulti,
			shape: []int64{1}, alloc: requestBound},
		{name: "lone high surrogate", body: `{"instances":["\ud800"]}`, sig: sigBytes,
			status: 400, prefix: "JSON Parse error: The surrogate pair in string is invalid. at offset: 15", alloc: errorBound},
		{name: "high surrogate then a non-low one", body: `{"instances":["\ud800\u0041"]}`, sig: sigBytes,
			status: 400, prefix: "JSON Parse error: The surrogate pair in string is invalid. at offset: 15", alloc: errorBound},
		{name: "lone low surrogate passes to Triton", body: `{"instances":["\udc00"]}`, sig: sigBytes,
			shape: []int64{1}, alloc: requestBound},
		{name: "lone low surrogate is not UTF-8 for KServe", body: `{"instances":["\udc00"]}`, sig: sigBytes, kind: oip.KServe,
			status: 400, prefix: "input 's' holds a string that is not valid UTF-8", alloc: errorBound},
		{name: "trailing garbage is ignored", body: `{"instances":[1]} }}}]]]"garbage` + strings.Repeat("\xff", 1000), sig: sigFloat,
			shape: []int64{1}, alloc: requestBound},
		{name: "empty body", body: "", sig: sigFloat,
			status: 400, prefix: "JSON Parse error: The document is empty", alloc: errorBound},
		{name: "1 MiB of white space", body: strings.Repeat(" \n\t\r", 1<<18), sig: sigFloat,
			status: 400, prefix: "JSON Parse error: The document is empty. at offset: 1048576", alloc: errorBound},
		{name: "null document", body: "null", sig: sigFloat,
			status: 400, prefix: "JSON Value: null Is not object", alloc: errorBound},
		{name: "null instances", body: `{"instances":null}`, sig: sigFloat,
			status: 400, prefix: "JSON Value: {\n    \"instances\": null\n} Expecting 'instances' to be an list/array", alloc: errorBound},
		{name: "null inputs", body: `{"inputs":null}`, sig: sigFloat,
			status: 400, prefix: "JSON Value: null Type: Null is not of expected type: float", alloc: errorBound},
		{name: "null element", body: `{"instances":[1,null]}`, sig: sigFloat,
			status: 400, prefix: "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: null Type: Null is not of expected type: float", alloc: errorBound},
		{name: "null signature_name", body: `{"signature_name":null,"instances":[1]}`, sig: sigFloat,
			status: 400, prefix: "JSON Value: {\n    \"signature_name\": null,", alloc: errorBound},
		{name: "null b64", body: `{"instances":[{"b64":null}]}`, sig: sigBytes,
			status: 400, prefix: "Failed to process element: 0 key: b64 of 'instances' list. Error: INVALID_ARGUMENT: JSON object: does not have named input: b64", alloc: errorBound},
		{name: "10^6 values, ragged at the end", body: `{"instances":[` + strings.Repeat("[1,2],", 500_000) + `[1]]}`, sig: sigFloat,
			status: 400, prefix: "Failed to process element: 500000 of 'instances' list. Error: INVALID_ARGUMENT: Expecting tensor size: 2 but got: 1", alloc: requestBound},
		{name: "bad base64 after 10^5 good ones", body: `{"instances":[` + strings.Repeat(`{"b64":"aGk="},`, 100_000) + `{"b64":"-_"}]}`, sig: sigBytes,
			status: 400, prefix: "Failed to process element: 100000 of 'instances' list. Error: INVALID_ARGUMENT: Unable to base64 decode", alloc: requestBound},
		{name: "unbalanced brackets in 1 MiB", body: `{"instances":[` + strings.Repeat("[1],", 1<<18), sig: sigFloat,
			status: 400, prefix: "JSON Parse error: Invalid value. at offset: 1048590", alloc: requestBound},
	}
}

// TestHostileRequests feeds hostile TF request bodies to the request
// pipeline: each gets TF Serving's answer (a 4xx *apierr.Error, or the
// tensors TF Serving would build) within its allocation bound.
func TestHostileRequests(t *testing.T) {
	for _, c := range requestCases() {
		t.Run(c.name, func(t *testing.T) {
			skipLargeUnderRace(t, len(c.body))
			opt := translate.RequestOptions{Kind: c.kind, ID: "robust", Limits: c.lim}
			var (
				req translate.V2Request
				err error
			)
			checkAlloc(t, len(c.body), c.alloc, func() {
				req, _, err = predictPipeline.Request([]byte(c.body), resolverFor(c.sig), opt)
			})
			if c.status != 0 {
				wantAPIError(t, err, c.status, c.prefix)
				return
			}
			if err != nil {
				t.Fatalf("predict Request: %v", err)
			}
			if len(req.Body) == 0 {
				t.Fatal("empty v2 body")
			}
			// The tensors themselves: Parse again and look at them.
			r, err := tfrequest.Parse([]byte(c.body), resolverFor(c.sig), c.lim)
			if err != nil {
				t.Fatalf("tfrequest.Parse: %v", err)
			}
			defer r.Release()
			if got := r.Inputs[0].Shape; !equalShape(got, c.shape) {
				t.Errorf("input shape = %v, want %v", got, c.shape)
			}
			for i := range r.Inputs {
				if err := r.Inputs[i].Validate(); err != nil {
					t.Errorf("invalid tensor: %v", err)
				}
			}
		})
	}
}

// skipLargeUnderRace skips a case of more than 1 MiB under -race: the
// pure translators are single-threaded, the race runtime makes such bodies
// take seconds, and the normal run covers them.
func skipLargeUnderRace(t *testing.T, size int) {
	if racebuild.Enabled && size > 1<<20 {
		t.Skip("large body under -race")
	}
}

func onesShape(n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// responseCase is one hostile v2 infer response.
type responseCase struct {
	name   string
	body   []byte
	hl     int // Inference-Header-Content-Length, -1 for none
	format tfjson.Format
	sig    *tensor.Signature
	status int // 0: translated; else the error's status
	prefix string
	want   string // the TF body when status is 0 ("" skips the check)
	alloc  bound
}

// binaryBody returns a v2 body with JSON header h and binary section bin,
// and the header length.
func binaryBody(h string, bin []byte) ([]byte, int) {
	return append([]byte(h), bin...), len(h)
}

func responseCases() []responseCase {
	row, col := tfjson.Row, tfjson.Columnar
	bad := "invalid response from inference server: "
	out := func(fields string) string { return `{"outputs":[{"name":"y",` + fields + `}]}` }
	ones := strings.TrimSuffix(strings.Repeat("1,", 10_000), ",")
	var cases []responseCase
	add := func(c responseCase) {
		if c.hl == 0 {
			c.hl = -1
		}
		if c.alloc == (bound{}) {
			c.alloc = responseBound
		}
		cases = append(cases, c)
	}
	tiny, tinyHL := binaryBody(out(`"datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}`), []byte{0, 0, 0x80, 0x3f})
	add(responseCase{name: "IHCL 2^40 on a 10-byte body", body: []byte(`{"outputs"`), hl: 1 << 40, format: row, status: 502,
		prefix: bad + "JSON header length 1099511627776 does not fit a body of 10 bytes"})
	add(responseCase{name: "IHCL one past the body", body: tiny, hl: len(tiny) + 1, format: row, status: 502, prefix: bad + "JSON header length"})
	add(responseCase{name: "IHCL cuts the JSON", body: tiny, hl: tinyHL - 5, format: row, status: 502, prefix: bad + "malformed JSON"})
	add(responseCase{name: "IHCL leaves JSON in the binary part", body: tiny, hl: tinyHL - 2, format: row, status: 502, prefix: bad})
	add(responseCase{name: "valid binary answer", body: tiny, hl: tinyHL, format: row, want: "{\n    \"predictions\": [1.0\n    ]\n}"})
	b, hl := binaryBody(out(`"datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4611686018427387904}`), []byte{1, 2, 3, 4})
	add(responseCase{name: "binary_data_size 2^62 on 4 bytes", body: b, hl: hl, format: row, status: 502,
		prefix: bad + "output 'y' announces 4611686018427387904 bytes of binary data but only 4 remain"})
	b, hl = binaryBody(out(`"datatype":"FP32","shape":[1],"parameters":{"binary_data_size":18446744073709551616}`), []byte{1, 2, 3, 4})
	add(responseCase{name: "binary_data_size 2^64", body: b, hl: hl, format: row, status: 502, prefix: bad + "output 'y' has an invalid binary_data_size"})
	b, hl = binaryBody(out(`"datatype":"FP32","shape":[1],"parameters":{"binary_data_size":-4}`), []byte{1, 2, 3, 4})
	add(responseCase{name: "negative binary_data_size", body: b, hl: hl, format: row, status: 502, prefix: bad + "output 'y' has an invalid binary_data_size"})
	b, hl = binaryBody(out(`"datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}`), []byte{1, 2, 3, 4, 5})
	add(responseCase{name: "a byte after the last block", body: b, hl: hl, format: row, status: 502, prefix: bad + "1 bytes of binary data follow the last output"})
	add(responseCase{name: "shape product overflows int64", body: []byte(out(`"datatype":"FP32","shape":[4294967296,4294967296],"data":[]`)), format: row, status: 502,
		prefix: bad + "output 'y' has shape [4294967296 4294967296], more than the limit"})
	add(responseCase{name: "shape of 10^9 with one value", body: []byte(out(`"datatype":"FP32","shape":[1000000000],"data":[1]`)), format: row, status: 502,
		prefix: bad + "output 'y' has shape [1000000000], more than the limit of 67108864 elements"})
	add(responseCase{name: "[6e7, 0] zero-size trick, row", body: []byte(out(`"datatype":"FP32","shape":[60000000,0],"data":[]`)), format: row, status: 502,
		prefix: bad + "its outputs would expand to a JSON body of up to"})
	add(responseCase{name: "[6e7, 0] zero-size trick, columnar", body: []byte(out(`"datatype":"FP32","shape":[60000000,0],"parameters":{"binary_data_size":0}`)), format: col, status: 502,
		prefix: bad + "its outputs would expand to a JSON body of up to"})
	add(responseCase{name: "[1e12, 0] zero-size trick", body: []byte(out(`"datatype":"FP32","shape":[1000000000000,0],"data":[]`)), format: col, status: 500,
		prefix: "Failed to write JSON value for tensor: y"})
	add(responseCase{name: "[1000, 0, 4] is a real empty answer", body: []byte(out(`"datatype":"FP32","shape":[1000,0,4],"data":[]`)), format: row,
		want: "{\n    \"predictions\": [" + strings.TrimSuffix(strings.Repeat("[], ", 1000), ", ") + "\n    ]\n}"})
	add(responseCase{name: "rank 10^4 indentation", body: []byte(out(`"datatype":"BOOL","shape":[` + ones + `,64],"data":` + list("true", 64))), format: col, status: 502,
		prefix: bad + "its outputs would expand to a JSON body of up to"})
	add(responseCase{name: "long names repeated per row", body: []byte(`{"outputs":[{"name":"` + strings.Repeat("n", 10_000) + `","datatype":"BOOL","shape":[10000],"data":` + list("true", 10_000) +
		`},{"name":"b","datatype":"BOOL","shape":[10000],"data":` + list("true", 10_000) + `}]}`), format: row, status: 502,
		prefix: bad + "its outputs would expand to a JSON body of up to"})
	add(responseCase{name: "BYTES count of 10^7 in one empty string", body: []byte(out(`"datatype":"BYTES","shape":[10000000],"data":[""]`)), format: row, status: 502,
		prefix: bad + "output 'y' has 1 data elements, shape [10000000] needs 10000000"})
	b, hl = binaryBody(out(`"datatype":"BYTES","shape":[10000000],"parameters":{"binary_data_size":40}`), make([]byte, 40))
	add(responseCase{name: "BYTES count of 10^7 in 40 bytes", body: b, hl: hl, format: row, status: 502,
		prefix: bad + "output 'y' has 40 bytes of binary data, too few for 10000000 BYTES elements"})
	b, hl = binaryBody(out(`"datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":8}`), binary.LittleEndian.AppendUint32(nil, 0xFFFFFFFF))
	add(responseCase{name: "BYTES length prefix 2^32-1", body: b, hl: hl, format: row, status: 502, prefix: bad + "output 'y' announces 8 bytes of binary data but only 4 remain"})
	b, hl = binaryBody(out(`"datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":4}`), binary.LittleEndian.AppendUint32(nil, 0xFFFFFFFF))
	add(responseCase{name: "BYTES element longer than its block", body: b, hl: hl, format: row, status: 502,
		prefix: bad + "output 'y': BYTES element 0 announces 4294967295 bytes but only 0 remain"})
	for _, dim := range []string{"-1", "1.5", "1e3", `"1"`, "null", "true", "18446744073709551616", "[1]"} {
		add(responseCase{name: "dimension " + dim, body: []byte(out(`"datatype":"FP32","shape":[` + dim + `],"data":[1]`)), format: row, status: 502,
			prefix: bad + "output 'y' has an invalid dimension"})
	}
	for name, body := range map[string]string{
		"null body":           "null",
		"null outputs":        `{"outputs":null}`,
		"null output":         `{"outputs":[null]}`,
		"null shape":          out(`"datatype":"FP32","shape":null,"data":[1]`),
		"null name":           `{"outputs":[{"name":null,"datatype":"FP32","shape":[1],"data":[1]}]}`,
		"null datatype":       out(`"datatype":null,"shape":[1],"data":[1]`),
		"null value for FP32": out(`"datatype":"INT32","shape":[1],"data":[null]`),
		"unknown datatype":    out(`"datatype":"FP8","shape":[1],"data":[1]`),
		"empty body":          "",
		"10^5 nested arrays":  out(`"datatype":"FP32","shape":[1],"data":` + strings.Repeat("[", 100_000)),
		"1e999999 in data":    out(`"datatype":"FP32","shape":[1],"data":[1e999999]`),
		"trailing garbage":    out(`"datatype":"FP32","shape":[1],"data":[1]`) + "garbage",
		"duplicate outputs":   `{"outputs":[{"name":"y","datatype":"FP32","shape":[1],"data":[1]},{"name":"y","datatype":"FP32","shape":[1],"data":[1]}]}`,
		"JSON array":          `[{"outputs":[]}]`,
		"HTML":                "<html><body>502 Bad Gateway</body></html>",
		"BOM and garbage":     "\xef\xbb\xbf\x00garbage",
	} {
		add(responseCase{name: name, body: []byte(body), format: row, status: 502, prefix: bad})
	}
	add(responseCase{name: "null means NaN for floats", body: []byte(out(`"datatype":"FP32","shape":[2],"data":[null,NaN]`)), format: row,
		want: "{\n    \"predictions\": [NaN, NaN\n    ]\n}"})
	add(responseCase{name: "invalid UTF-8 passes through", body: []byte(out("\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[\"\xff\xc0\"]")), format: row,
		want: "{\n    \"predictions\": [\"\xff\xc0\"\n    ]\n}"})
	add(responseCase{name: "duplicate outputs key: the first wins", body: []byte(`{"outputs":[{"name":"y","datatype":"INT8","shape":[1],"data":[7]}],"outputs":null}`), format: col,
		want: "{\n    \"outputs\": [\n        7\n    ]\n}"})
	add(responseCase{name: "10^5 outputs named alike", body: []byte(`{"outputs":[` + strings.TrimSuffix(strings.Repeat(`{"name":"o","datatype":"BOOL","shape":[0]},`, 100_000), ",") + `]}`),
		format: col, status: 502, prefix: bad + "output 'o' appears twice"})
	var many strings.Builder
	for i := range 100_000 {
		if i > 0 {
			many.WriteByte(',')
		}
		many.WriteString(`{"name":"o` + strconv.Itoa(i) + `","datatype":"BOOL","shape":[1,0]}`)
	}
	add(responseCase{name: "10^5 empty outputs, row", body: []byte(`{"outputs":[` + many.String() + `]}`), format: row})
	add(responseCase{name: "10^5 empty outputs, columnar", body: []byte(`{"outputs":[` + many.String() + `]}`), format: col})
	return cases
}

// TestHostileResponses feeds hostile v2 infer answers to the response
// pipeline: each is translated as TF Serving would answer, or refused
// with a 502 (a 500 for shapes no decoder may hand over), within its
// allocation bound.
func TestHostileResponses(t *testing.T) {
	for _, c := range responseCases() {
		t.Run(c.name, func(t *testing.T) {
			ex := translate.Exchange{Format: c.format, Signature: c.sig}
			var (
				out []byte
				err error
			)
			checkAlloc(t, len(c.body), c.alloc, func() {
				out, err = predictPipeline.Response(c.body, c.hl, ex, tensor.Limits{})
			})
			if c.status != 0 {
				wantAPIError(t, err, c.status, c.prefix)
				return
			}
			if err != nil {
				t.Fatalf("the predict pipeline's Response: %v", err)
			}
			if c.want != "" && string(out) != c.want {
				t.Errorf("TF body = %.300q, want %.300q", out, c.want)
			}
		})
	}
}

// TestHostileDecode runs the response cases through oip.DecodeResponse
// alone: whatever it accepts is a list of valid tensors within the
// element limit, whatever it refuses is a 502.
func TestHostileDecode(t *testing.T) {
	for _, c := range responseCases() {
		t.Run(c.name, func(t *testing.T) {
			var (
				outs []tensor.Tensor
				err  error
			)
			checkAlloc(t, len(c.body), c.alloc, func() {
				outs, err = oip.DecodeResponse(c.body, c.hl, c.sig, tensor.Limits{})
			})
			if err != nil {
				wantAPIError(t, err, 502, "invalid response from inference server: ")
				return
			}
			var elems int64
			for i := range outs {
				if verr := outs[i].Validate(); verr != nil {
					t.Errorf("accepted an invalid tensor: %v", verr)
				}
				n, _ := tensor.NumElements(outs[i].Shape)
				elems += n
			}
			if elems > tensor.DefaultLimits.MaxElements {
				t.Errorf("accepted %d elements, over the limit", elems)
			}
		})
	}
}

// TestHostileMetadata feeds hostile model metadata and Triton configs to
// the parsers behind the signature cache: every refusal is a 502 and the
// parsers' memory stays proportional to the body.
func TestHostileMetadata(t *testing.T) {
	in := func(fields string) string {
		return `{"name":"m","versions":["1"],"platform":"p","inputs":[{"name":"x",` + fields + `}],"outputs":[]}`
	}
	bad := "invalid model metadata from inference server: "
	metaCases := []struct {
		name, body string
		status     int
		prefix     string
		inputs     int
	}{
		{"10^5 nested arrays", in(`"datatype":"FP32","shape":` + strings.Repeat("[", 100_000)), 502, bad, 0},
		{"10^5-digit dimension", in(`"datatype":"FP32","shape":[` + strings.Repeat("9", 100_000) + `]`), 502, bad, 0},
		{"float dimension", in(`"datatype":"FP32","shape":[1.5]`), 502, bad, 0},
		{"dimension -2", in(`"datatype":"FP32","shape":[-2]`), 502, bad + `input "x" has invalid dimension -2`, 0},
		{"null shape", in(`"datatype":"FP32","shape":null`), 502, bad + `input "x" has no shape`, 0},
		{"null datatype", in(`"datatype":null,"shape":[1]`), 502, bad + `input "x" has no datatype`, 0},
		{"unknown datatype", in(`"datatype":"FP8","shape":[1]`), 502, bad + `input "x" has unknown datatype "FP8"`, 0},
		{"null name", `{"name":"m","inputs":[{"name":null,"datatype":"FP32","shape":[1]}]}`, 502, bad + "input 0 has no name", 0},
		{"duplicate inputs", `{"name":"m","inputs":[{"name":"x","datatype":"FP32","shape":[1]},{"name":"x","datatype":"FP32","shape":[1]}]}`, 502, bad + `duplicate input "x"`, 0},
		{"null document", "null", 200, "", 0},
		{"invalid UTF-8 name", "{\"name\":\"\xff\",\"inputs\":[{\"name\":\"\xfe\",\"datatype\":\"FP32\",\"shape\":[1]}]}", 200, "", 1},
		{"trailing garbage", in(`"datatype":"FP32","shape":[1]`) + "garbage", 502, bad, 0},
		{"10^5 inputs", `{"name":"m","inputs":[` + strings.TrimSuffix(strings.Repeat(`{"name":"x","datatype":"FP32","shape":[-1]},`, 100_000), ",") + `]}`,
			502, bad + "100000 inputs, more than the limit of 4096", 0},
		// Issue 13: rendered as TF metadata, a dimension takes about 100
		// bytes; 15 MiB of them made a 464 MB answer.
		{"10^6-dimension shape", in(`"datatype":"FP32","shape":` + list("1", 1_000_000)), 502,
			bad + "1000000 dimensions in all, more than the limit of 65536", 0},
	}
	for _, c := range metaCases {
		t.Run("metadata/"+c.name, func(t *testing.T) {
			var (
				sig *tensor.Signature
				err error
			)
			// encoding/json: a dimension costs 2 body bytes and up to 16
			// bytes of slice growth, plus the decoder's own state.
			checkAlloc(t, len(c.body), bound{PerByte: 32, Fixed: 64 << 10}, func() {
				sig, err = oip.ParseModelMetadata([]byte(c.body))
			})
			if c.status != 200 {
				wantAPIError(t, err, c.status, c.prefix)
				return
			}
			if err != nil {
				t.Fatalf("ParseModelMetadata: %v", err)
			}
			if len(sig.Inputs) != c.inputs {
				t.Errorf("%d inputs, want %d", len(sig.Inputs), c.inputs)
			}
		})
	}
	configCases := []struct {
		name, body string
		batch      int64
		ok         bool
	}{
		{"max_batch_size 1e999", `{"max_batch_size":1e999}`, 0, false},
		{"max_batch_size -1", `{"max_batch_size":-1}`, 0, false},
		{"max_batch_size 2^40", `{"max_batch_size":1099511627776}`, 0, false},
		{"max_batch_size string", `{"max_batch_size":"abc"}`, 0, false},
		{"max_batch_size quoted", `{"max_batch_size":"8"}`, 8, true},
		{"max_batch_size null", `{"max_batch_size":null}`, 0, true},
		{"10^5 nested objects", strings.Repeat(`{"a":`, 100_000), 0, false},
		{"not JSON", "\x00\xff", 0, false},
		{"1 MiB of unknown fields", `{"x":"` + strings.Repeat("y", 1<<20) + `","max_batch_size":4}`, 4, true},
	}
	for _, c := range configCases {
		t.Run("config/"+c.name, func(t *testing.T) {
			sig := &tensor.Signature{Inputs: []tensor.Spec{{Name: "x", DataType: tensor.FP32, Shape: []int64{-1}}}}
			var err error
			checkAlloc(t, len(c.body), bound{PerByte: 4, Fixed: 64 << 10}, func() {
				err = oip.ApplyTritonConfig(sig, []byte(c.body))
			})
			if !c.ok {
				wantAPIError(t, err, 502, "invalid model config from inference server: ")
				return
			}
			if err != nil || sig.MaxBatchSize != c.batch || sig.Batched != (c.batch > 0) {
				t.Errorf("ApplyTritonConfig = %v, max_batch_size %d batched %v; want nil, %d", err, sig.MaxBatchSize, sig.Batched, c.batch)
			}
		})
	}
}

// TestHostilePaths routes hostile request targets: TF's 400 texts, never
// a panic, and memory proportional to the path.
func TestHostilePaths(t *testing.T) {
	long := strings.Repeat("a", 1<<20)
	cases := []struct {
		name, method, path string
		status             int // 0: routed; -1: not TF Serving's
		prefix             string
	}{
		{"1 MiB model name", "POST", "/v1/models/" + long + ":predict", 0, ""},
		{"1 MiB of percent signs", "POST", "/v1/models/" + strings.Repeat("%", 1<<20) + ":predict", 400, "Failed to decode model name:%%%"},
		{"1 MiB of %00", "GET", "/v1/models/" + strings.Repeat("%00", 1<<18), 0, ""},
		{"NUL byte", "POST", "/v1/models/a\x00b:predict", 400, "Failed to decode model name:a\x00b"},
		{"newline", "POST", "/v1/models/a\nb:predict", -1, ""},
		{"invalid UTF-8", "POST", "/v1/models/\xff\xfe:predict", 400, "Failed to decode model name:\xff\xfe"},
		{"10^5-digit version", "POST", "/v1/models/m/versions/" + strings.Repeat("9", 100_000) + ":predict", 400, "Failed to convert version: 9999"},
		{"10^5 segments", "GET", "/v1/models/m" + strings.Repeat("/x", 100_000), 400, "Malformed request: GET /v1/models/m/x/x"},
		{"not TF Serving", "POST", "/v2/models/" + long + "/infer", -1, ""},
		{"empty", "GET", "", -1, ""},
		{"1 MiB method", long, "/v1/models/m", 400, "Malformed request: aaaa"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var (
				r   route.Route
				err error
			)
			checkAlloc(t, len(c.path)+len(c.method), bound{PerByte: 4, Fixed: 64 << 10}, func() {
				r, err = route.Parse(c.method, c.path)
			})
			switch c.status {
			case 0:
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if r.Model == "" || len(r.V2InferPath()) < len(r.Model) {
					t.Errorf("route %+v has no usable model", r)
				}
			case -1:
				if !errors.Is(err, route.ErrNotTFServing) {
					t.Errorf("error = %v, want ErrNotTFServing", err)
				}
			default:
				wantAPIError(t, err, c.status, c.prefix)
			}
		})
	}
}

// TestHostileTensors gives tfresponse.Predict tensors no decoder should
// hand over and tensors built to expand: a TF-style error, never a panic,
// and no write without bound.
func TestHostileTensors(t *testing.T) {
	f32 := func(shape []int64, n int) tensor.Tensor {
		return tensor.Tensor{Name: "y", DataType: tensor.FP32, Shape: shape, Data: make([]byte, 4*n)}
	}
	cases := []struct {
		name    string
		format  tfjson.Format
		outputs []tensor.Tensor
		status  int
		prefix  string
	}{
		{"data shorter than the shape", tfjson.Row, []tensor.Tensor{f32([]int64{1 << 40}, 1)}, 500, "Failed to write JSON value for tensor: y"},
		{"negative dimension", tfjson.Row, []tensor.Tensor{f32([]int64{-1}, 0)}, 500, "Failed to write JSON value for tensor: y"},
		{"overflowing shape", tfjson.Columnar, []tensor.Tensor{f32([]int64{1 << 62, 1 << 62}, 0)}, 500, "Failed to write JSON value for tensor: y"},
		{"strings fewer than the shape", tfjson.Row, []tensor.Tensor{{Name: "s", DataType: tensor.Bytes, Shape: []int64{1 << 30}}}, 500, "Failed to write JSON value for tensor: s"},
		{"[6e7, 0]", tfjson.Row, []tensor.Tensor{f32([]int64{60_000_000, 0}, 0)}, 502, "invalid response from inference server: its outputs would expand"},
		{"[8000, 8000, 0]", tfjson.Columnar, []tensor.Tensor{f32([]int64{8000, 8000, 0}, 0)}, 502, "invalid response from inference server: its outputs would expand"},
		{"invalid datatype", tfjson.Row, []tensor.Tensor{{Name: "y", DataType: tensor.DataType(200), Shape: []int64{1}, Data: []byte{1}}}, 400, "Failed to write JSON value for tensor type: invalid"},
		{"no outputs", tfjson.Row, nil, 400, "Cannot convert empty tensor map to JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			checkAlloc(t, 64, bound{Fixed: 64 << 10}, func() {
				_, err = tfresponse.Predict(nil, c.outputs, c.format)
			})
			wantAPIError(t, err, c.status, c.prefix)
		})
	}
}
