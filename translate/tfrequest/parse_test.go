package tfrequest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/internal/jsontape"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// sigOf builds a signature from "name:DTYPE" pairs, in order.
func sigOf(specs ...string) *tensor.Signature {
	s := &tensor.Signature{Model: "m"}
	for _, sp := range specs {
		name, dt, _ := strings.Cut(sp, ":")
		d, ok := tensor.ParseV2(dt)
		if !ok {
			panic(dt)
		}
		s.Inputs = append(s.Inputs, tensor.Spec{Name: name, DataType: d})
	}
	return s
}

func fixed(sig *tensor.Signature) Resolver {
	return func(string) (*tensor.Signature, error) { return sig, nil }
}

// render prints tensors compactly: name:DTYPE[shape]=values.
func render(ts []tensor.Tensor) string {
	var parts []string
	for i := range ts {
		t := &ts[i]
		var vals []string
		for j := 0; j < t.Len(); j++ {
			switch t.DataType {
			case tensor.Bytes:
				vals = append(vals, fmt.Sprintf("%q", t.Strings[j]))
			case tensor.FP32, tensor.FP64:
				vals = append(vals, fmt.Sprint(t.Float64At(j)))
			case tensor.FP16, tensor.BF16, tensor.Uint16:
				vals = append(vals, fmt.Sprintf("%#04x", binary.LittleEndian.Uint16(t.Data[2*j:])))
			case tensor.Uint64:
				vals = append(vals, fmt.Sprint(t.Uint64At(j)))
			default:
				vals = append(vals, fmt.Sprint(t.Int64At(j)))
			}
		}
		parts = append(parts, fmt.Sprintf("%s:%v%v=%s", t.Name, t.DataType, t.Shape, strings.Join(vals, ",")))
	}
	return strings.Join(parts, " ")
}

// TestParse runs each rule of docs/tfserving-rest.md §3–§4 once: either the exact tensors or
// the exact message.
func TestParse(t *testing.T) {
	one := sigOf("x:FP32")
	tests := []parseCase{
		// Top level and order of checks.
		{name: "empty body", sig: one, body: "", err: "JSON Parse error: The document is empty"},
		{name: "blank body", sig: one, body: "  ", err: "JSON Parse error: The document is empty. at offset: 2"},
		{name: "syntax", sig: one, body: "{instances}", err: "JSON Parse error: Missing a name for object member. at offset: 1"},
		{name: "not object", sig: one, body: "[1, 2]", err: "JSON Value: [1, 2] Is not object"},
		{name: "signature_name not string", sig: one, body: `{"signature_name": 1, "instances": [1]}`,
			err: "JSON Value: {\n    \"signature_name\": 1,\n    \"instances\": [1]\n} not formatted correctly. 'signature_name' key must be a string value."},
		{name: "no inputs in signature", sig: &tensor.Signature{}, body: `{"instances": [1]}`, err: "Failed to get input map for signature: DEFAULT"},
		{name: "no inputs in named signature", sig: &tensor.Signature{}, body: `{"signature_name": "s", "instances": [1]}`, err: "Failed to get input map for signature: s"},
		{name: "both keys", sig: one, body: `{"instances": [1], "inputs": [1]}`,
			err: "JSON Value: {\n    \"instances\": [1],\n    \"inputs\": [1]\n} Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist "},
		{name: "neither key", sig: one, body: `{"instance": [1]}`, err: "Missing 'inputs' or 'instances' key"},
		{name: "instances not array", sig: one, body: `{"instances": 1}`, err: "JSON Value: {\n    \"instances\": 1\n} Expecting 'instances' to be an list/array"},
		{name: "instances empty", sig: one, body: `{"instances": []}`, err: "JSON Value: {\n    \"instances\": []\n} No values in 'instances' array"},
		{name: "trailing junk ignored", sig: one, body: `{"instances": [1]} junk`, format: tfjson.Row, want: "x:FP32[1]=1"},
		{name: "keys case-sensitive", sig: one, body: `{"Instances": [1]}`, err: "Missing 'inputs' or 'instances' key"},

		// Row format.
		{name: "row scalars", sig: one, body: `{"instances": [1, 2.5, -3]}`, format: tfjson.Row, want: "x:FP32[3]=1,2.5,-3"},
		{name: "row zero-size", sig: one, body: `{"instances": [[]]}`, format: tfjson.Row, want: "x:FP32[1 0]="},
		{name: "row named single", sig: one, body: `{"instances": [{"x": [1, 2]}, {"x": [3, 4]}]}`, format: tfjson.Row, want: "x:FP32[2 2]=1,2,3,4"},
		{name: "row multi", sig: sigOf("a:INT32", "b:BYTES"), body: `{"instances": [{"b": "p", "a": 1}, {"a": 2, "b": "q"}]}`, format: tfjson.Row,
			want: `a:INT32[2]=1,2 b:BYTES[2]="p","q"`},
		{name: "row duplicate key keeps first values", sig: one, body: `{"instances": [{"x": 1, "x": 2}, {"x": 3}]}`, format: tfjson.Row, want: "x:FP32[2]=1,2"},
		{name: "row plain list multi", sig: sigOf("a:INT32", "b:INT32"), body: `{"instances": [[1]]}`,
			err: "instances is a plain list, but expecting list of objects as multiple input tensors required as per tensorinfo_map"},
		{name: "row b64 first slips past multi check", sig: sigOf("a:BYTES", "b:INT32"), body: `{"instances": [{"b64": "aGk="}, "x"]}`,
			err: "input size does not match signature: 1!=2 len({a}) != len({a,b}). Sent extra: {}. Missing but required: {b}."},
		{name: "row object after values", sig: one, body: `{"instances": [1, {"x": 2}]}`, err: "Expecting value/list but got object at item 1 of input list"},
		{name: "row value after objects", sig: one, body: `{"instances": [{"x": 1}, 2]}`, err: "Expecting object but got list at item 1 of input list"},
		{name: "row b64 after objects", sig: sigOf("x:BYTES"), body: `{"instances": [{"x": "a"}, {"b64": "aGk="}]}`, err: "Expecting object but got list at item 1 of input list"},
		{name: "row unknown key", sig: one, body: `{"instances": [{"x": 1, "y": 2}]}`,
			err: "Failed to process element: 0 key: y of 'instances' list. Error: INVALID_ARGUMENT: JSON object: does not have named input: y"},
		{name: "row missing key", sig: sigOf("b:INT32", "a:INT32"), body: `{"instances": [{"a": 1, "b": 2}, {"b": 3}]}`,
			err: "Failed to process element: 1 of 'instances' list. JSON object: {\n    \"b\": 3\n} keys must be equal to: a,b"},
		{name: "row type error wrapped with key", sig: sigOf("a:INT32", "b:INT32"), body: `{"instances": [{"a": 1, "b": "s"}]}`,
			err: "Failed to process element: 0 key: b of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: \"s\" Type: String is not of expected type: int32"},
		{name: "row size mismatch", sig: one, body: `{"instances": [[1, 2], [3]]}`,
			err: "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: Expecting tensor size: 2 but got: 1"},
		{name: "row shape mismatch scalar", sig: one, body: `{"instances": [[1], 2]}`,
			err: "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: Expecting shape [1] but got: []"},
		{name: "row ragged inside instance", sig: one, body: `{"instances": [[[1, 2], [3]]]}`,
			err: "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: Encountered list at unexpected size: 1 at level: 1 expected size: 2"},

		// Columnar format.
		{name: "col scalar", sig: one, body: `{"inputs": 7}`, format: tfjson.Columnar, want: "x:FP32[]=7"},
		{name: "col empty list", sig: one, body: `{"inputs": []}`, format: tfjson.Columnar, want: "x:FP32[0]="},
		{name: "col named ignores extras", sig: sigOf("a:INT64", "b:BOOL"), body: `{"inputs": {"z": "junk", "b": [true, false], "a": [[1], [2]]}}`, format: tfjson.Columnar,
			want: "a:INT64[2 1]=1,2 b:BOOL[2]=1,0"},
		{name: "col named single", sig: one, body: `{"inputs": {"x": [1]}}`, format: tfjson.Columnar, want: "x:FP32[1]=1"},
		{name: "col named first duplicate wins", sig: one, body: `{"inputs": {"x": [1], "x": [2, 3]}}`, format: tfjson.Columnar, want: "x:FP32[1]=1"},
		{name: "col plain multi", sig: sigOf("a:INT32", "b:INT32"), body: `{"inputs": [1]}`,
			err: "inputs is a plain value/list, but expecting an object as multiple input tensors required as per tensorinfo_map"},
		{name: "col missing named", sig: sigOf("a:INT32", "b:INT32"), body: `{"inputs": {"a": 1}}`, err: "Missing named input: b in 'inputs' object."},
		{name: "col b64 scalar", sig: sigOf("s:BYTES"), body: `{"inputs": {"b64": "aGVsbG8"}}`, format: tfjson.Columnar, want: `s:BYTES[]="hello"`},
		{name: "col level off by one", sig: one, body: `{"inputs": [[1, 2], 3]}`,
			err: "JSON Value: 3 found at incorrect level: 2 in the JSON DOM. Expected at level: 2"},
		{name: "col list too deep", sig: one, body: `{"inputs": [1, [2]]}`, err: "Encountered list at unexpected level: 1 expected < 1"},
		{name: "col object for float", sig: one, body: `{"inputs": [{"a": 1}]}`,
			err: "JSON Value: {\n    \"a\": 1\n} Type: Object is not of expected type: float"},
		{name: "col bad object for string", sig: sigOf("s:BYTES"), body: `{"inputs": [{"b64": 1}]}`,
			err: "JSON Value: {\n    \"b64\": 1\n} not formatted correctly for base64 data"},
		{name: "col b64 invalid", sig: sigOf("s:BYTES"), body: `{"inputs": [{"b64": "a-b_"}]}`, err: "Unable to base64 decode"},

		// Value conversion (docs/tfserving-rest.md §4.5) and the FP16/BF16/UINT16 departure.
		{name: "float specials", sig: one, body: `{"inputs": [NaN, -Infinity, 1e39, -2.22507e-308]}`, format: tfjson.Columnar, want: "x:FP32[4]=NaN,-Inf,+Inf,-0"},
		{name: "float from big int", sig: one, body: `{"inputs": [1435774380, 18446744073709551615]}`, format: tfjson.Columnar, want: "x:FP32[2]=1.435774336e+09,1.8446744073709552e+19"},
		{name: "double normal precision", sig: sigOf("d:FP64"), body: `{"inputs": [1234.5678901234567]}`, format: tfjson.Columnar,
			want: fmt.Sprintf("d:FP64[1]=%v", math.Float64frombits(0x40934a4584fd0fe0))},
		{name: "float rejects string", sig: one, body: `{"inputs": ["1"]}`, err: `JSON Value: "1" Type: String is not of expected type: float`},
		{name: "float rejects bool", sig: one, body: `{"inputs": true}`, err: `JSON Value: true Type: True is not of expected type: float`},
		{name: "int32 range", sig: sigOf("i:INT32"), body: `{"inputs": [-2147483648, 2147483647]}`, format: tfjson.Columnar, want: "i:INT32[2]=-2147483648,2147483647"},
		{name: "int32 overflow", sig: sigOf("i:INT32"), body: `{"inputs": [2147483648]}`, err: "JSON Value: 2147483648 Type: Number is not of expected type: int32"},
		{name: "int32 rejects 1e2", sig: sigOf("i:INT32"), body: `{"inputs": [1e2]}`, err: "JSON Value: 100.0 Type: Number is not of expected type: int32"},
		{name: "int32 rejects NaN (empty dump)", sig: sigOf("i:INT32"), body: `{"inputs": [NaN]}`, err: "JSON Value:  Type: Number is not of expected type: int32"},
		{name: "int8 wraps", sig: sigOf("i:INT8"), body: `{"inputs": [200, -129, 127]}`, format: tfjson.Columnar, want: "i:INT8[3]=-56,127,127"},
		{name: "int16 wraps", sig: sigOf("i:INT16"), body: `{"inputs": [40000]}`, format: tfjson.Columnar, want: "i:INT16[1]=-25536"},
		{name: "int16 checks int32", sig: sigOf("i:INT16"), body: `{"inputs": [3000000000]}`, err: "JSON Value: 3000000000 Type: Number is not of expected type: int16"},
		{name: "uint8 wraps", sig: sigOf("u:UINT8"), body: `{"inputs": [300, -1]}`, format: tfjson.Columnar, want: "u:UINT8[2]=44,255"},
		{name: "int64 limits", sig: sigOf("i:INT64"), body: `{"inputs": [-9223372036854775808, 9223372036854775807, -0]}`, format: tfjson.Columnar,
			want: "i:INT64[3]=-9223372036854775808,9223372036854775807,0"},
		{name: "int64 overflow", sig: sigOf("i:INT64"), body: `{"inputs": [9223372036854775808]}`, err: "JSON Value: 9223372036854775808 Type: Number is not of expected type: int64"},
		{name: "uint32", sig: sigOf("u:UINT32"), body: `{"inputs": [4294967295]}`, format: tfjson.Columnar, want: "u:UINT32[1]=4294967295"},
		{name: "uint32 negative", sig: sigOf("u:UINT32"), body: `{"inputs": [-1]}`, err: "JSON Value: -1 Type: Number is not of expected type: uint32"},
		{name: "uint32 overflow", sig: sigOf("u:UINT32"), body: `{"inputs": [4294967296]}`, err: "JSON Value: 4294967296 Type: Number is not of expected type: uint32"},
		{name: "uint64 max", sig: sigOf("u:UINT64"), body: `{"inputs": [18446744073709551615]}`, format: tfjson.Columnar, want: "u:UINT64[1]=18446744073709551615"},
		{name: "uint64 beyond", sig: sigOf("u:UINT64"), body: `{"inputs": [18446744073709551616]}`,
			err: "JSON Value: 18446744073709553000.0 Type: Number is not of expected type: uint64"},
		{name: "bool", sig: sigOf("b:BOOL"), body: `{"inputs": [true, false]}`, format: tfjson.Columnar, want: "b:BOOL[2]=1,0"},
		{name: "bool rejects 0", sig: sigOf("b:BOOL"), body: `{"inputs": [0]}`, err: "JSON Value: 0 Type: Number is not of expected type: bool"},
		{name: "bool rejects null", sig: sigOf("b:BOOL"), body: `{"inputs": [null]}`, err: "JSON Value: null Type: Null is not of expected type: bool"},
		{name: "string raw bytes", sig: sigOf("s:BYTES"), body: "{\"inputs\": [\"\xff\\u0000\", \"\\ud83d\\ude00\"]}", format: tfjson.Columnar, want: `s:BYTES[2]="\xff\x00","😀"`},
		{name: "string rejects number", sig: sigOf("s:BYTES"), body: `{"inputs": [1]}`, err: "JSON Value: 1 Type: Number is not of expected type: string"},
		{name: "string rejects list object", sig: sigOf("s:BYTES"), body: `{"inputs": [{"b64": "aGk=", "x": 1}]}`,
			err: "JSON Value: {\n    \"b64\": \"aGk=\",\n    \"x\": 1\n} not formatted correctly for base64 data"},
		{name: "fp16 from numbers", sig: sigOf("h:FP16"), body: `{"inputs": [1, -2.5, 65520, 1e-8]}`, format: tfjson.Columnar, want: "h:FP16[4]=0x3c00,0xc100,0x7c00,0x0000"},
		{name: "fp16 rejects string", sig: sigOf("h:FP16"), body: `{"inputs": ["a"]}`, err: `JSON Value: "a" Type: String is not of expected type: half`},
		{name: "bf16 truncates", sig: sigOf("h:BF16"), body: `{"inputs": [1.5, 1.00999]}`, format: tfjson.Columnar, want: "h:BF16[2]=0x3fc0,0x3f81"},
		{name: "uint16 narrows", sig: sigOf("u:UINT16"), body: `{"inputs": [70000, 65535]}`, format: tfjson.Columnar, want: "u:UINT16[2]=0x1170,0xffff"},
		{name: "uint16 rejects negative", sig: sigOf("u:UINT16"), body: `{"inputs": [-1]}`, err: "JSON Value: -1 Type: Number is not of expected type: uint16"},
		{name: "uint16 rejects decimal", sig: sigOf("u:UINT16"), body: `{"inputs": [1.0]}`, err: "JSON Value: 1.0 Type: Number is not of expected type: uint16"},
	}
	runParse(t, tests)
}

// parseCase is one Parse call and its exact outcome.
type parseCase = struct {
	name   string
	sig    *tensor.Signature
	body   string
	format tfjson.Format
	want   string // rendered tensors
	err    string // exact message
	code   apierr.Code
}

func runParse(t *testing.T, tests []parseCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if checkStream(t, []byte(tt.body), fixed(tt.sig), tensor.Limits{}) {
				t.Errorf("streaming decoder: undecided")
			}
			req, err := Parse([]byte(tt.body), fixed(tt.sig), tensor.Limits{})
			if tt.err != "" {
				var e *apierr.Error
				if !errors.As(err, &e) {
					t.Fatalf("err = %v (%T), want *apierr.Error %q", err, err, tt.err)
				}
				code := tt.code
				if code == 0 {
					code = apierr.InvalidArgument
				}
				if e.Msg != tt.err || e.Code != code {
					t.Errorf("got %v %q\nwant %v %q", e.Code, e.Msg, code, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			defer req.Release()
			if req.Format != tt.format {
				t.Errorf("format %v, want %v", req.Format, tt.format)
			}
			for i := range req.Inputs {
				if err := req.Inputs[i].Validate(); err != nil {
					t.Errorf("invalid tensor: %v", err)
				}
			}
			if got := render(req.Inputs); got != tt.want {
				t.Errorf("tensors\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestLongDumps: every "JSON Value: <dump>" message carries TF's
// token-limited dump (docs/tfserving-rest.md §4.1): the token that crosses 256 bytes is
// written whole, then nothing — no closing bracket, no "...".
func TestLongDumps(t *testing.T) {
	x := strings.Repeat("x", 300)
	nums := "[" + strings.Repeat("123456789, ", 29) + "123456789]"
	numsDump := "[" + strings.Repeat("123456789, ", 23) + "123456789"
	runParse(t, []parseCase{
		{name: "is not object", sig: sigOf("x:FP32"), body: nums, err: "JSON Value: " + numsDump + " Is not object"},
		{name: "both keys", sig: sigOf("x:FP32"), body: `{"instances": ["` + x + `"], "inputs": 1}`,
			err: "JSON Value: {\n    \"instances\": [\"" + x + "\" Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist "},
		{name: "signature_name not a string", sig: sigOf("x:FP32"), body: `{"signature_name": ["` + x[:260] + `"], "instances": [1]}`,
			err: "JSON Value: {\n    \"signature_name\": [\"" + x[:260] + "\" not formatted correctly. 'signature_name' key must be a string value."},
		{name: "instances not a list, cut after a key", sig: sigOf("x:FP32"), body: `{"` + x + `": 1, "instances": 2}`,
			err: "JSON Value: {\n    \"" + x + "\" Expecting 'instances' to be an list/array"},
		{name: "keys must be equal to", sig: sigOf("a:BYTES", "b:BYTES"), body: `{"instances": [{"a": "` + x + `"}]}`,
			err: "Failed to process element: 0 of 'instances' list. JSON object: {\n    \"a\": \"" + x + "\" keys must be equal to: a,b"},
		{name: "type error on a big object", sig: sigOf("x:FP32"), body: `{"inputs": [{"k": ` + nums + `}]}`,
			err: "JSON Value: {\n    \"k\": " + numsDump[:len(numsDump)-11] + " Type: Object is not of expected type: float"},
		{name: "type error on a long string", sig: sigOf("x:FP32"), body: `{"instances": ["` + x + `"]}`,
			err: "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: \"" + x + "\" Type: String is not of expected type: float"},
		{name: "incorrect level", sig: sigOf("x:FP32"), body: `{"inputs": [[1], {"k": ` + nums + `, "l": 2}]}`,
			err: "JSON Value: {\n    \"k\": " + numsDump[:len(numsDump)-11] + " found at incorrect level: 2 in the JSON DOM. Expected at level: 2"},
	})
}

// TestRowKeysAreCStrings: TF reads an instance object's keys as C strings,
// so a key ends at its first NUL; keys that collapse to one name behave as
// a duplicated key (both values added, the tensor keeps the first ones).
// Columnar names and "b64" keep their full length (docs/tfserving-rest.md §4.1).
func TestRowKeysAreCStrings(t *testing.T) {
	one := sigOf("x:FP32")
	two := sigOf("a:FP32", "b:FP32")
	runParse(t, []parseCase{
		{name: "NUL key feeds its prefix", sig: one, body: `{"instances": [{"x\u0000junk": 1.0}]}`, format: tfjson.Row, want: "x:FP32[1]=1"},
		{name: "NUL right after the name", sig: two, body: `{"instances": [{"b\u0000": 2, "a": 1}]}`, format: tfjson.Row, want: "a:FP32[1]=1 b:FP32[1]=2"},
		{name: "texts name the cut key", sig: one, body: `{"instances": [{"x\u0000junk": "s"}]}`,
			err: "Failed to process element: 0 key: x of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: \"s\" Type: String is not of expected type: float"},
		{name: "unknown cut key", sig: two, body: `{"instances": [{"a": 1, "c\u0000a": 2}]}`,
			err: "Failed to process element: 0 key: c of 'instances' list. Error: INVALID_ARGUMENT: JSON object: does not have named input: c"},
		{name: "empty cut key", sig: one, body: `{"instances": [{"\u0000x": 1}]}`,
			err: "Failed to process element: 0 key:  of 'instances' list. Error: INVALID_ARGUMENT: JSON object: does not have named input: "},
		{name: "collapsed keys add both values", sig: one, body: `{"instances": [{"x\u0000a": 1, "x\u0000b": 2}, {"x": 3, "x\u0000": 4}]}`,
			format: tfjson.Row, want: "x:FP32[2]=1,2"},
		{name: "collapsed keys must match in size", sig: one, body: `{"instances": [{"x\u0000a": [1, 2], "x\u0000b": [3]}]}`,
			err: "Failed to process element: 0 key: x of 'instances' list. Error: INVALID_ARGUMENT: Expecting tensor size: 2 but got: 1"},
		{name: "collapsed keys leave an input out", sig: two, body: `{"instances": [{"a": 1, "a\u0000b": 2}]}`,
			err: "Failed to process element: 0 of 'instances' list. JSON object: {\n    \"a\": 1,\n    \"a\\u0000b\": 2\n} keys must be equal to: a,b"},
		{name: "b64 with a NUL is a named-input object", sig: sigOf("s:BYTES"), body: `{"instances": [{"b64\u0000": "aGk="}]}`,
			err: "Failed to process element: 0 key: b64 of 'instances' list. Error: INVALID_ARGUMENT: JSON object: does not have named input: b64"},
		{name: "columnar NUL key is another name", sig: one, body: `{"inputs": {"x\u0000junk": [1]}}`, err: "Missing named input: x in 'inputs' object."},
		{name: "columnar NUL key ignored", sig: one, body: `{"inputs": {"x\u0000": [9], "x": [1]}}`, format: tfjson.Columnar, want: "x:FP32[1]=1"},
		{name: "columnar b64 with a NUL is no b64 object", sig: sigOf("s:BYTES"), body: `{"inputs": {"b64\u0000": "aGk="}}`,
			err: "Missing named input: s in 'inputs' object."},
	})
}

// TestInputsSize: TF's predictor refuses, before the model, a parsed
// request that holds other inputs than the signature (predict_util.cc
// VerifyRequestInputsSize). Row b64 instances are the one way there.
func TestInputsSize(t *testing.T) {
	b64 := `{"instances": [{"b64": "aGk="}, "x"]}`
	runParse(t, []parseCase{
		{name: "b64 rows, one input", sig: sigOf("s:BYTES"), body: b64, format: tfjson.Row, want: `s:BYTES[2]="hi","x"`},
		{name: "b64 rows, two inputs", sig: sigOf("a_bytes:BYTES", "x:FP32"), body: b64,
			err: "input size does not match signature: 1!=2 len({a_bytes}) != len({a_bytes,x}). Sent extra: {}. Missing but required: {x}."},
		{name: "b64 rows, three inputs, names sorted", sig: sigOf("s:BYTES", "b:INT32", "a:FP32"), body: b64,
			err: "input size does not match signature: 1!=3 len({s}) != len({a,b,s}). Sent extra: {}. Missing but required: {a,b}."},
		{name: "b64 rows, uppercase sorts first", sig: sigOf("s:BYTES", "b:INT32", "Z:FP32"), body: `{"instances": [{"b64": ""}]}`,
			err: "input size does not match signature: 1!=3 len({s}) != len({Z,b,s}). Sent extra: {}. Missing but required: {Z,b}."},
		{name: "parse errors come first: object after b64", sig: sigOf("a:BYTES", "b:INT32"), body: `{"instances": [{"b64": "aGk="}, {"a": "x"}]}`,
			err: "Expecting value/list but got object at item 1 of input list"},
		{name: "parse errors come first: bad base64", sig: sigOf("a:BYTES", "b:INT32"), body: `{"instances": [{"b64": "a-b_"}]}`,
			err: "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: Unable to base64 decode"},
		{name: "parse errors come first: first input not a string", sig: sigOf("x:FP32", "a:BYTES"), body: `{"instances": [{"b64": "aGk="}]}`,
			err: "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: {\n    \"b64\": \"aGk=\"\n} Type: Object is not of expected type: float"},
		{name: "columnar extras pass the count", sig: sigOf("a:INT32", "b:INT32"), body: `{"inputs": {"c": 3, "b": 2, "a": 1}}`, format: tfjson.Columnar,
			want: "a:INT32[]=1 b:INT32[]=2"},
		{name: "columnar b64 object, two inputs", sig: sigOf("a:BYTES", "b:BYTES"), body: `{"inputs": {"b64": "aGk="}}`,
			err: "inputs is a plain value/list, but expecting an object as multiple input tensors required as per tensorinfo_map"},
		{name: "columnar missing name", sig: sigOf("a:INT32", "b:INT32"), body: `{"inputs": {"a": 1, "c": 3}}`, err: "Missing named input: b in 'inputs' object."},
	})
}

// TestVerifyInputsSize covers what no parser path produces today: extra
// names, and duplicate signature names (TF's map counts them once).
func TestVerifyInputsSize(t *testing.T) {
	tensors := func(names ...string) []tensor.Tensor {
		ts := make([]tensor.Tensor, len(names))
		for i, n := range names {
			ts[i].Name = n
		}
		return ts
	}
	tests := []struct {
		sig    *tensor.Signature
		inputs []tensor.Tensor
		err    string
	}{
		{sigOf("a:FP32", "b:FP32"), tensors("b", "a"), ""},
		{sigOf("a:FP32", "b:FP32"), tensors("z", "a"), ""}, // same size: TF's alias check, not this one, names z
		{sigOf("c:FP32", "a:FP32", "b:FP32"), tensors("z", "a"),
			"input size does not match signature: 2!=3 len({a,z}) != len({a,b,c}). Sent extra: {z}. Missing but required: {b,c}."},
		{sigOf("a:FP32"), tensors("a", "b"), "input size does not match signature: 2!=1 len({a,b}) != len({a}). Sent extra: {b}. Missing but required: {}."},
		{sigOf("a:FP32", "a:FP32"), tensors("a"), ""},
	}
	for _, tt := range tests {
		err := verifyInputsSize(tt.sig, tt.inputs)
		got := ""
		if e := apierr.As(err); e != nil {
			got = e.Msg
			if e.Code != apierr.InvalidArgument {
				t.Errorf("code %v", e.Code)
			}
		}
		if got != tt.err {
			t.Errorf("%v vs %v:\n got %q\nwant %q", tt.inputs, tt.sig.Inputs, got, tt.err)
		}
	}
}

// TestCheckOrder: JSON and signature_name errors come before the model
// lookup; everything else after it, and the lookup's error is returned as
// is (docs/tfserving-rest.md §2.3).
func TestCheckOrder(t *testing.T) {
	notFound := apierr.New(apierr.NotFound, "Servable not found for request: Latest(m)")
	failing := func(string) (*tensor.Signature, error) { return nil, notFound }
	tests := []struct {
		body     string
		resolved bool
	}{
		{"", false},
		{"[", false},
		{"5", false},
		{`{"signature_name": [], "instances": [1]}`, false},
		{`{}`, true},
		{`{"instances": [1], "inputs": 2}`, true},
		{`{"instances": []}`, true},
		{`{"signature_name": "s", "instances": [[1], 2]}`, true},
	}
	for _, tt := range tests {
		called := false
		_, err := Parse([]byte(tt.body), func(n string) (*tensor.Signature, error) { called = true; return failing(n) }, tensor.Limits{})
		if called != tt.resolved {
			t.Errorf("%q: resolver called %v, want %v", tt.body, called, tt.resolved)
		}
		if tt.resolved && err != error(notFound) { //nolint:errorlint // the resolver's error itself, not wrapped
			t.Errorf("%q: err %v, want the resolver's error as is", tt.body, err)
		}
		if !tt.resolved && (err == nil || errors.Is(err, notFound)) {
			t.Errorf("%q: err %v, want a parse error", tt.body, err)
		}
	}
	var gotName string
	_, _ = Parse([]byte(`{"signature_name": "first", "signature_name": 2, "instances": [1]}`),
		func(n string) (*tensor.Signature, error) { gotName = n; return sigOf("x:FP32"), nil }, tensor.Limits{})
	if gotName != "first" {
		t.Errorf("signature name %q, want the first occurrence", gotName)
	}
}

func TestLimits(t *testing.T) {
	sig := sigOf("x:FP32")
	lim := tensor.Limits{MaxDepth: 4, MaxElements: 4}
	if req, err := Parse([]byte(`{"instances": [[1, 2], [3, 4]]}`), fixed(sig), lim); err != nil {
		t.Errorf("at the element limit: %v", err)
	} else {
		req.Release()
	}
	_, err := Parse([]byte(`{"instances": [[1, 2], [3, 4], [5, 6]]}`), fixed(sig), lim)
	if e := apierr.As(err); e == nil || e.Code != apierr.InvalidArgument ||
		e.Msg != "Failed to process element: 2 of 'instances' list. Error: INVALID_ARGUMENT: Request holds more than 4 tensor elements, the limit of this server" {
		t.Errorf("over the element limit: %v", err)
	}
	_, err = Parse([]byte(`{"inputs": [[[[1]]]]}`), fixed(sig), lim)
	if e := apierr.As(err); e == nil || e.Msg != "JSON Parse error: Document nests deeper than the limit. at offset: 14" {
		t.Errorf("over the depth limit: %v", err)
	}
}

// TestRelease: buffers go back to the pool and come out clean.
func TestRelease(t *testing.T) {
	sig := sigOf("x:FP32", "s:BYTES")
	for i := 0; i < 5; i++ {
		body := fmt.Sprintf(`{"inputs": {"x": [%d, %d], "s": ["a\n%d"]}}`, i, i+1, i)
		req, err := Parse([]byte(body), fixed(sig), tensor.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`x:FP32[2]=%d,%d s:BYTES[1]="a\n%d"`, i, i+1, i)
		if got := render(req.Inputs); got != want {
			t.Fatalf("round %d: %s, want %s", i, got, want)
		}
		req.Release()
		req.Release()
		if req.Inputs != nil {
			t.Fatal("Inputs kept after Release")
		}
	}
}

func TestDenseShape(t *testing.T) {
	if !slices.Equal(denseShape(jsonRoot(t, `[[1,2],[3]]`), nil), []int64{2, 2}) {
		t.Error("dense shape of a ragged list")
	}
}

func jsonRoot(t *testing.T, s string) jsontape.Value {
	t.Helper()
	d, err := jsontape.Parse([]byte(s), jsontext.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Release)
	return d.Root()
}
