package tfexample

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// exampleDescriptor is tensorflow/core/example/{feature,example}.proto
// rebuilt as a descriptor, so the tests can check Parse's hand-written
// wire bytes against protobuf's own (deterministic) serialization.
var exampleDescriptor = newExampleDescriptor("proto3")

// rawKeyExampleDescriptor is the same messages declared proto2, whose
// string fields Go's protobuf does not check for UTF-8. TF Serving copies
// JSON keys into feature names without validating them (RapidJSON runs
// without kParseValidateEncodingFlag, and C++ protobuf only logs when it
// serializes a proto3 string with bad UTF-8), so a feature name may be any
// bytes; this descriptor checks the wire format alone.
var rawKeyExampleDescriptor = newExampleDescriptor("proto2")

func newExampleDescriptor(syntax string) protoreflect.MessageDescriptor {
	s := proto.String
	field := func(name string, num int32, label descriptorpb.FieldDescriptorProto_Label, typ descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: s(name), JsonName: s(name), Number: proto.Int32(num), Label: label.Enum(), Type: typ.Enum()}
		if typeName != "" {
			f.TypeName = s(typeName)
		}
		return f
	}
	const (
		rep = descriptorpb.FieldDescriptorProto_LABEL_REPEATED
		opt = descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
		msg = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
	)
	oneof := func(f *descriptorpb.FieldDescriptorProto) *descriptorpb.FieldDescriptorProto {
		f.OneofIndex = proto.Int32(0)
		return f
	}
	file := &descriptorpb.FileDescriptorProto{
		Name: s("example.proto"), Package: s("tensorflow"), Syntax: s(syntax),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: s("BytesList"), Field: []*descriptorpb.FieldDescriptorProto{field("value", 1, rep, descriptorpb.FieldDescriptorProto_TYPE_BYTES, "")}},
			{Name: s("FloatList"), Field: []*descriptorpb.FieldDescriptorProto{field("value", 1, rep, descriptorpb.FieldDescriptorProto_TYPE_FLOAT, "")}},
			{Name: s("Int64List"), Field: []*descriptorpb.FieldDescriptorProto{field("value", 1, rep, descriptorpb.FieldDescriptorProto_TYPE_INT64, "")}},
			{Name: s("Feature"), OneofDecl: []*descriptorpb.OneofDescriptorProto{{Name: s("kind")}}, Field: []*descriptorpb.FieldDescriptorProto{
				oneof(field("bytes_list", 1, opt, msg, ".tensorflow.BytesList")),
				oneof(field("float_list", 2, opt, msg, ".tensorflow.FloatList")),
				oneof(field("int64_list", 3, opt, msg, ".tensorflow.Int64List")),
			}},
			{Name: s("Features"), Field: []*descriptorpb.FieldDescriptorProto{field("feature", 1, rep, msg, ".tensorflow.Features.FeatureEntry")},
				NestedType: []*descriptorpb.DescriptorProto{{
					Name:    s("FeatureEntry"),
					Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
					Field: []*descriptorpb.FieldDescriptorProto{
						field("key", 1, opt, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
						field("value", 2, opt, msg, ".tensorflow.Feature"),
					},
				}}},
			{Name: s("Example"), Field: []*descriptorpb.FieldDescriptorProto{field("features", 1, opt, msg, ".tensorflow.Features")}},
		},
	}
	fd, err := protodesc.NewFile(file, nil)
	if err != nil {
		panic(err)
	}
	return fd.Messages().ByName("Example")
}

// wantExample serializes a tf.Example given in protobuf text format the
// way protobuf does deterministically.
func wantExample(t *testing.T, text string) []byte {
	t.Helper()
	m := dynamicpb.NewMessage(exampleDescriptor)
	if err := prototext.Unmarshal([]byte(text), m); err != nil {
		t.Fatalf("bad test example %q: %v", text, err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeExample parses serialized bytes as protobuf would (so context ++
// example bytes become their merge) and re-serializes them.
func decodeExample(t *testing.T, b []byte) []byte {
	t.Helper()
	m := dynamicpb.NewMessage(exampleDescriptor)
	if err := proto.Unmarshal(b, m); err != nil {
		t.Fatalf("serialized example does not parse: %v", err)
	}
	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func feat(name, value string) string {
	return `feature { key: "` + name + `" value { ` + value + ` } }`
}

func features(f ...string) string { return "features { " + strings.Join(f, " ") + " }" }

func TestParse(t *testing.T) {
	cases := []struct {
		name string
		body string
		sig  string
		// want: each example in text format (after merging the context).
		want []string
		// raw: when set, the exact bytes of each example (before merging).
		raw [][]byte
	}{
		{
			name: "kinds",
			body: `{"examples": [{"s": "a", "b": {"b64": "aGk="}, "i": 7, "t": true, "f": false, "x": 1.5, "n": -3, "e": []}]}`,
			want: []string{features(
				feat("s", `bytes_list { value: "a" }`), feat("b", `bytes_list { value: "hi" }`),
				feat("i", `int64_list { value: 7 }`), feat("t", `int64_list { value: 1 }`),
				feat("f", `int64_list { value: 0 }`), feat("x", `float_list { value: 1.5 }`),
				feat("n", `int64_list { value: -3 }`), feat("e", ``))},
		},
		{
			name: "lists",
			body: `{"examples": [{"s": ["a", {"b64": "Yg=="}, ""], "i": [1, -9223372036854775808, true], "x": [1.0, NaN, -Infinity, 1e-50, 3.4e39]}]}`,
			want: []string{features(
				feat("s", `bytes_list { value: ["a", "b", ""] }`),
				feat("i", `int64_list { value: [1, -9223372036854775808, 1] }`),
				feat("x", `float_list { value: [1, nan, -inf, 0, inf] }`))},
		},
		{
			name: "integers beyond uint64 are floats",
			body: `{"examples": [{"x": [18446744073709551616, 2.5]}]}`,
			want: []string{features(feat("x", `float_list { value: [1.8446744e19, 2.5] }`))},
		},
		{
			name: "signature name, several examples, an empty one",
			body: `{"signature_name": "sig", "examples": [{"a": 1}, {}, {"a": "x"}]}`,
			sig:  "sig",
			want: []string{features(feat("a", `int64_list { value: 1 }`)), ``, features(feat("a", `bytes_list { value: "x" }`))},
			raw:  [][]byte{{0x0a, 0x0c, 0x0a, 0x0a, 0x0a, 0x01, 'a', 0x12, 0x05, 0x1a, 0x03, 0x0a, 0x01, 0x01}, {}, nil},
		},
		{
			name: "context merged, the example wins",
			body: `{"context": {"c": 1, "both": "ctx"}, "examples": [{"both": 2.0}, {"e": "x"}]}`,
			want: []string{
				features(feat("both", `float_list { value: 2 }`), feat("c", `int64_list { value: 1 }`)),
				features(feat("both", `bytes_list { value: "ctx" }`), feat("c", `int64_list { value: 1 }`), feat("e", `bytes_list { value: "x" }`)),
			},
		},
		{
			name: "empty context",
			body: `{"context": {}, "examples": [{"a": 1}]}`,
			want: []string{features(feat("a", `int64_list { value: 1 }`))},
		},
		{
			name: "duplicate feature: the last wins; the name ends at NUL",
			body: `{"examples": [{"a": 1, "b\u0000junk": "x", "a": [2, 3]}]}`,
			want: []string{features(feat("a", `int64_list { value: [2, 3] }`), feat("b", `bytes_list { value: "x" }`))},
		},
		{
			name: "escapes and raw bytes pass through",
			body: "{\"examples\": [{\"k\\n\": \"\\u00e9\xff\\u0000\"}]}",
			want: []string{features(feat(`k\n`, `bytes_list { value: "\303\251\377\000" }`))},
		},
		{
			name: "duplicate top-level keys: the first wins; trailing junk ignored",
			body: `{"examples": [{"a": 1}], "examples": 5} junk`,
			want: []string{features(feat("a", `int64_list { value: 1 }`))},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Parse([]byte(c.body), Options{})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if r.SignatureName != c.sig {
				t.Errorf("signature %q, want %q", r.SignatureName, c.sig)
			}
			if len(r.Examples) != len(c.want) {
				t.Fatalf("%d examples, want %d", len(r.Examples), len(c.want))
			}
			for i, w := range c.want {
				want := wantExample(t, w)
				if !bytes.Contains([]byte(c.body), []byte(`"context"`)) && !bytes.Equal(r.Examples[i], want) {
					// Without a context the bytes are protobuf's own.
					t.Errorf("example %d:\n got %x\nwant %x", i, r.Examples[i], want)
				}
				if got := decodeExample(t, r.Examples[i]); !bytes.Equal(got, want) {
					t.Errorf("example %d parses to\n %x\nwant %x", i, got, want)
				}
				if i < len(c.raw) && c.raw[i] != nil && !bytes.Equal(r.Examples[i], c.raw[i]) {
					t.Errorf("example %d bytes %x, want %x", i, r.Examples[i], c.raw[i])
				}
			}
		})
	}
}

func TestParseContextBytes(t *testing.T) {
	// With a context each example is exactly the context's bytes followed
	// by the example's.
	r, err := Parse([]byte(`{"context": {"c": [1, 2]}, "examples": [{"e": "x"}, {}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := wantExample(t, features(feat("c", `int64_list { value: [1, 2] }`)))
	ex := wantExample(t, features(feat("e", `bytes_list { value: "x" }`)))
	if want := append(append([]byte{}, ctx...), ex...); !bytes.Equal(r.Examples[0], want) {
		t.Errorf("example 0 = %x, want %x", r.Examples[0], want)
	}
	if !bytes.Equal(r.Examples[1], ctx) {
		t.Errorf("example 1 = %x, want the context %x", r.Examples[1], ctx)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, body string
		opt        Options
		status     int
		msg        string
	}{
		{"empty body", ``, Options{}, 400, "JSON Parse error: The document is empty"},
		{"syntax", `{"examples": [}`, Options{}, 400, "JSON Parse error: Invalid value. at offset: 14"},
		{"not an object", `[1, 2]`, Options{}, 400, "JSON Value: [1, 2] Is not object"},
		{"signature_name not a string", `{"signature_name": 1, "examples": [{}]}`, Options{}, 400,
			"JSON Value: {\n    \"signature_name\": 1,\n    \"examples\": [{}]\n} not formatted correctly. 'signature_name' key must be a string value."},
		{"examples missing", `{"example": []}`, Options{}, 400,
			"JSON Value: {\n    \"example\": []\n} When method is classify, key 'examples' is expected and was not found"},
		{"examples not an array", `{"examples": {"a": 1}}`, Options{}, 400,
			"JSON Value: {\n    \"examples\": {\n        \"a\": 1\n    }\n} Expecting 'examples' value to be an list/array"},
		{"examples empty", `{"examples": []}`, Options{}, 400, "JSON Value: {\n    \"examples\": []\n} 'examples' value is an empty array"},
		{"example not an object", `{"examples": [{}, [{"a": 1}]]}`, Options{}, 400, "Example must be JSON object but got JSON Array"},
		{"example a string", `{"examples": ["a"]}`, Options{}, 400, "Example must be JSON object but got JSON String"},
		{"context not an object", `{"context": 1, "examples": [{}]}`, Options{}, 400, "Example must be JSON object but got JSON Number"},
		{"context checked before examples", `{"examples": 1, "context": {"a": null}}`, Options{}, 400, "Feature: a has element with unexpected JSON type: Null"},
		{"null", `{"examples": [{"names": [10, null]}]}`, Options{}, 400, "Feature: names has element with unexpected JSON type: Null"},
		{"null scalar", `{"examples": [{"names": null}]}`, Options{}, 400, "Feature: names has element with unexpected JSON type: Null"},
		{"nested list", `{"examples": [{"names": [[10], 20]}]}`, Options{}, 400, "Feature: names has element with unexpected JSON type: Array"},
		{"object", `{"examples": [{"names": [10, {"test": 10}]}]}`, Options{}, 400, "Feature: names has element with unexpected JSON type: Object"},
		{"b64 with a number", `{"examples": [{"names": {"b64": 1}}]}`, Options{}, 400, "Feature: names has element with unexpected JSON type: Object"},
		{"b64 with two members", `{"examples": [{"names": {"b64": "", "x": 1}}]}`, Options{}, 400, "Feature: names has element with unexpected JSON type: Object"},
		{"bad base64", `{"examples": [{"names": {"b64": "a-b_"}}]}`, Options{}, 400, "Unable to base64 decode"},
		{"int then float", `{"examples": [{"names": [10, 10.0]}]}`, Options{}, 400, "Unexpected element type in feature: names expecting type: int64"},
		{"float then string", `{"examples": [{"x": [1.5, "a"]}]}`, Options{}, 400, "Unexpected element type in feature: x expecting type: float"},
		{"string then bool", `{"examples": [{"x": ["a", true]}]}`, Options{}, 400, "Unexpected element type in feature: x expecting type: bytes"},
		{"bytes then b64", `{"examples": [{"x": [1, {"b64": "aGk="}]}]}`, Options{}, 400, "Unexpected element type in feature: x expecting type: int64"},
		{"uint64", `{"examples": [{"x": [1, 9223372036854775808]}]}`, Options{}, 400, "Feature: x has uint64_t element. Only int64_t is supported."},
		{"mixed kinds are checked before uint64", `{"examples": [{"x": [1.0, 9223372036854775808]}]}`, Options{}, 400, "Unexpected element type in feature: x expecting type: float"},
		{"name cut at NUL in messages", `{"examples": [{"n\u0000x": null}]}`, Options{}, 400, "Feature: n has element with unexpected JSON type: Null"},
		{"element limit", `{"examples": [{"x": [1, 2, 3]}]}`, Options{Limits: tensor.Limits{MaxElements: 3}}, 400,
			"Request holds more than 3 tensor elements, the limit of this server"},
		{"context counted per example", `{"context": {"x": [1, 2]}, "examples": [{}, {}]}`, Options{Limits: tensor.Limits{MaxElements: 5}}, 400,
			"Request holds more than 5 tensor elements, the limit of this server"},
		{"byte limit", `{"examples": [{"x": "` + strings.Repeat("a", 100) + `"}]}`, Options{MaxBytes: 100}, 413,
			"Request examples serialize to more than 100 bytes, the limit of this server"},
		{"context bytes multiplied", `{"context": {"x": "` + strings.Repeat("a", 60) + `"}, "examples": [{}, {}]}`, Options{MaxBytes: 100}, 413,
			"Request examples serialize to more than 100 bytes, the limit of this server"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Parse([]byte(c.body), c.opt)
			if err == nil {
				t.Fatalf("no error; %d examples", len(r.Examples))
			}
			var e *apierr.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is %T", err, err)
			}
			if e.Msg != c.msg || e.HTTPStatus() != c.status {
				t.Errorf("error %d %q\nwant  %d %q", e.HTTPStatus(), e.Msg, c.status, c.msg)
			}
		})
	}
}

func TestCheckSignature(t *testing.T) {
	in := tensor.Spec{Name: "inputs", DataType: tensor.Bytes, Shape: []int64{-1}}
	out := func(name string, dt tensor.DataType) tensor.Spec { return tensor.Spec{Name: name, DataType: dt} }
	classifier := &tensor.Signature{Inputs: []tensor.Spec{in}, Outputs: []tensor.Spec{out("classes", tensor.Bytes), out("scores", tensor.FP32)}}
	scoresOnly := &tensor.Signature{Inputs: []tensor.Spec{in}, Outputs: []tensor.Spec{out("scores", tensor.FP16)}}
	regressor := &tensor.Signature{Inputs: []tensor.Spec{in}, Outputs: []tensor.Spec{out("outputs", tensor.FP32)}}
	both := &tensor.Signature{Inputs: []tensor.Spec{in}, Outputs: []tensor.Spec{out("outputs", tensor.FP32), out("classes", tensor.Bytes)}}
	predict := &tensor.Signature{Inputs: []tensor.Spec{{Name: "x", DataType: tensor.FP32}}, Outputs: []tensor.Spec{out("y", tensor.FP32)}}
	floatInputs := &tensor.Signature{Inputs: []tensor.Spec{{Name: "inputs", DataType: tensor.FP32}}, Outputs: []tensor.Spec{out("scores", tensor.FP32)}}
	twoInputs := &tensor.Signature{Inputs: []tensor.Spec{in, {Name: "x", DataType: tensor.FP32}}, Outputs: []tensor.Spec{out("outputs", tensor.FP32)}}
	const (
		notClassify = "Expected classification signature method_name to be tensorflow/serving/classify. Was: "
		notRegress  = "Expected regression signature method_name to be tensorflow/serving/regress. Was: "
	)
	cases := []struct {
		name string
		sig  *tensor.Signature
		m    Method
		want string
	}{
		{"classifier", classifier, Classify, ""},
		{"scores only (dtype checked on the answer)", scoresOnly, Classify, ""},
		{"regressor", regressor, Regress, ""},
		{"both kinds: classify", both, Classify, ""},
		{"both kinds: regress", both, Regress, ""},
		{"regress on a classifier", classifier, Regress, notRegress + "tensorflow/serving/classify"},
		{"classify on a regressor", regressor, Classify, notClassify + "tensorflow/serving/regress"},
		{"classify on a predict model", predict, Classify, notClassify + "tensorflow/serving/predict"},
		{"regress on a predict model", predict, Regress, notRegress + "tensorflow/serving/predict"},
		{"inputs not BYTES", floatInputs, Classify, notClassify + "tensorflow/serving/predict"},
		{"no signature", nil, Classify, notClassify + "tensorflow/serving/predict"},
		{"two inputs", twoInputs, Regress, "Expected one input Tensor."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckSignature(c.sig, c.m)
			got := ""
			if err != nil {
				got = apierr.As(err).Msg
				if s := apierr.As(err).HTTPStatus(); s != 400 {
					t.Errorf("status %d", s)
				}
			}
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestInputShape(t *testing.T) {
	sig := func(shape ...int64) *tensor.Signature {
		return &tensor.Signature{Inputs: []tensor.Spec{{Name: "inputs", DataType: tensor.Bytes, Shape: shape}}}
	}
	for _, c := range []struct {
		sig  *tensor.Signature
		want []int64
	}{
		{sig(-1), []int64{3}},
		{sig(-1, 1), []int64{3, 1}},
		{sig(-1, -1), []int64{3, 1}},
		{sig(), []int64{3}},
		{sig(-1, 2), []int64{3}},
	} {
		got := InputShape(c.sig, 3)
		if len(got) != len(c.want) || got[0] != c.want[0] || (len(got) == 2 && got[1] != c.want[1]) {
			t.Errorf("InputShape(%v) = %v, want %v", c.sig.Inputs[0].Shape, got, c.want)
		}
	}
}

// TestParseHostileAllocation: a small body whose context would be copied
// into every one of many examples is refused before the copies are made.
func TestParseHostileAllocation(t *testing.T) {
	body := `{"context": {"x": "` + strings.Repeat("a", 64<<10) + `"}, "examples": [` +
		strings.TrimSuffix(strings.Repeat("{}, ", 50000), ", ") + `]}`
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Parse([]byte(body), Options{})
	runtime.ReadMemStats(&after)
	if e := apierr.As(err); err == nil || e.HTTPStatus() != 413 {
		t.Fatalf("error %v, want a 413", err)
	}
	// 50000 copies of the context would be 3.2 GB; the bound is 64 times
	// the body (17 MB), far below that and above what the race detector's
	// instrumentation adds to the parse's own ~20 times.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64*uint64(len(body)) {
		t.Errorf("allocated %d bytes for a %d-byte body", alloc, len(body))
	}
}

// TestParseRawFeatureName: feature names are copied byte for byte, invalid
// UTF-8 included, as TF Serving does (see rawKeyExampleDescriptor).
func TestParseRawFeatureName(t *testing.T) {
	cases := []struct {
		name, body string
		want       []byte
	}{
		{"lone continuation byte", "{\"examples\": [{\"\x8a\": []}]}",
			[]byte{0x0a, 0x07, 0x0a, 0x05, 0x0a, 0x01, 0x8a, 0x12, 0x00}},
		{"truncated sequence", "{\"examples\": [{\"a\xe2\x82\": [1]}]}",
			[]byte{0x0a, 0x0e, 0x0a, 0x0c, 0x0a, 0x03, 'a', 0xe2, 0x82, 0x12, 0x05, 0x1a, 0x03, 0x0a, 0x01, 0x01}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Parse([]byte(c.body), Options{})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(r.Examples) != 1 || !bytes.Equal(r.Examples[0], c.want) {
				t.Fatalf("examples %x, want [%x]", r.Examples, c.want)
			}
			if err := proto.Unmarshal(r.Examples[0], dynamicpb.NewMessage(rawKeyExampleDescriptor)); err != nil {
				t.Errorf("not a tf.Example on the wire: %v", err)
			}
		})
	}
}
