package grpcmap

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/x448/float16"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/internal/grpcproto"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/oipgrpc"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfexample"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// The differential fuzz targets: the gRPC pipeline and the REST one
// (package translate) must agree on the v2 tensors a TF request becomes,
// and on the TF tensors a v2 answer becomes.

// source hands out the fuzzer's bytes as choices (zeros once exhausted).
type source struct{ b []byte }

func (s *source) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *source) n(k int) int { return int(s.byte()) % k }

func (s *source) u64() uint64 {
	var x uint64
	for i := 0; i < 8; i++ {
		x = x<<8 | uint64(s.byte())
	}
	return x
}

// fuzzTypes are the datatypes both REST and gRPC can carry.
var fuzzTypes = []tensor.DataType{tensor.FP32, tensor.FP64, tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64,
	tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64, tensor.Bool, tensor.FP16, tensor.BF16, tensor.Bytes}

// genTensor makes a random tensor: shape of rank 0-3 with dims 1-3,
// finite values, printable strings. Its first k elements are random, the
// others repeat the one before, so that a typed field of k values
// broadcasts to it. Floats are the values TF Serving's REST parser reads
// from their shortest text (RapidJSON's normal precision, which
// translate/jsontext reproduces, is not always correctly rounded): texts
// holds that text per element.
func genTensor(s *source, name string) (t tensor.Tensor, k int, texts []string) {
	t, k = genValues(s, name)
	switch t.DataType {
	case tensor.FP32, tensor.FP64, tensor.FP16, tensor.BF16:
	default:
		return t, k, nil
	}
	for i := range t.Len() {
		text := jsonElem(&t, i)
		num, _, ok := jsontext.ParseNumber([]byte(text), 0)
		if !ok {
			panic("unparsable " + text)
		}
		f := num.Float64() // "-0" is the integer 0 to RapidJSON: +0
		switch t.DataType {
		case tensor.FP32:
			binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(float32(f)))
		case tensor.FP64:
			binary.LittleEndian.PutUint64(t.Data[8*i:], math.Float64bits(f))
		case tensor.FP16:
			binary.LittleEndian.PutUint16(t.Data[2*i:], float16.Fromfloat32(float32(f)).Bits())
		default:
			binary.LittleEndian.PutUint16(t.Data[2*i:], tensor.BF16FromFloat32(float32(f)))
		}
		texts = append(texts, text)
	}
	return t, k, texts
}

func genValues(s *source, name string) (tensor.Tensor, int) {
	t := tensor.Tensor{Name: name, DataType: fuzzTypes[s.n(len(fuzzTypes))]}
	for r := s.n(4); r > 0; r-- {
		t.Shape = append(t.Shape, int64(1+s.n(3)))
	}
	n, _ := tensor.NumElements(t.Shape)
	k := int(n)
	if s.n(3) == 0 {
		k = 1 + s.n(int(n)) // a short typed field, broadcast
	}
	for i := 0; i < int(n); i++ {
		if i >= k {
			if t.DataType == tensor.Bytes {
				t.Strings = append(t.Strings, t.Strings[i-1])
			} else {
				size := t.DataType.Size()
				t.Data = append(t.Data, t.Data[len(t.Data)-size:]...)
			}
			continue
		}
		u := s.u64()
		switch t.DataType {
		case tensor.Bytes:
			l := int(u % 5)
			str := make([]byte, l)
			for j := range str {
				str[j] = 'a' + byte((u>>(8+j*5))%26)
			}
			t.Strings = append(t.Strings, str)
		case tensor.Bool:
			t.Data = append(t.Data, byte(u&1))
		case tensor.FP32:
			f := math.Float32frombits(uint32(u))
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				f = float32(int32(u >> 40))
			}
			t.Data = binary.LittleEndian.AppendUint32(t.Data, math.Float32bits(f))
		case tensor.FP64:
			f := math.Float64frombits(u)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				f = float64(int64(u)) / 7
			}
			t.Data = binary.LittleEndian.AppendUint64(t.Data, math.Float64bits(f))
		case tensor.FP16:
			h := uint16(u)
			if h&0x7c00 == 0x7c00 {
				h &^= 0x4000
			}
			t.Data = binary.LittleEndian.AppendUint16(t.Data, h)
		case tensor.BF16:
			h := uint16(u)
			if h&0x7f80 == 0x7f80 {
				h &^= 0x4000
			}
			t.Data = binary.LittleEndian.AppendUint16(t.Data, h)
		default:
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], u)
			t.Data = append(t.Data, b[:t.DataType.Size()]...)
		}
	}
	return t, k
}

// jsonValues writes t's values as the nested JSON list (or scalar) a TF
// REST client sends (texts, when set, for each element).
func jsonValues(t *tensor.Tensor, texts []string) string {
	var b strings.Builder
	var walk func(dim, off int) int
	walk = func(dim, off int) int {
		if dim == len(t.Shape) {
			if texts != nil {
				b.WriteString(texts[off])
			} else {
				b.WriteString(jsonElem(t, off))
			}
			return off + 1
		}
		b.WriteByte('[')
		for i := int64(0); i < t.Shape[dim]; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			off = walk(dim+1, off)
		}
		b.WriteByte(']')
		return off
	}
	walk(0, 0)
	return b.String()
}

func jsonElem(t *tensor.Tensor, i int) string {
	switch t.DataType {
	case tensor.Bytes:
		return strconv.Quote(string(t.Strings[i]))
	case tensor.Bool:
		return strconv.FormatBool(t.Data[i] != 0)
	case tensor.FP32, tensor.FP16, tensor.BF16:
		return strconv.FormatFloat(t.Float64At(i), 'g', -1, 32)
	case tensor.FP64:
		return strconv.FormatFloat(t.Float64At(i), 'g', -1, 64)
	case tensor.Uint64:
		return strconv.FormatUint(t.Uint64At(i), 10)
	}
	return strconv.FormatInt(t.Int64At(i), 10)
}

// protoTensor writes t as a TF client would, with the protobuf runtime:
// tensor_content, or the typed field holding its first k values (TF
// repeats the last), narrow integers with noise in their high bits
// (TF keeps the low ones).
func protoTensor(s *source, t *tensor.Tensor, k int) *dynamicpb.Message {
	dtype := int32(tfgrpc.DTypeOf(t.DataType))
	if s.n(2) == 0 && k == t.Len() {
		var content []byte
		if t.DataType == tensor.Bytes {
			for _, str := range t.Strings {
				content = binary.AppendUvarint(content, uint64(len(str)))
			}
			for _, str := range t.Strings {
				content = append(content, str...)
			}
		} else {
			content = t.Data
		}
		if len(content) > 0 {
			return grpcproto.TensorProto(dtype, t.Shape, grpcproto.Content(content))
		}
	}
	noise := int64(s.n(4)) << 16
	var vals []protoreflect.Value
	field := ""
	allZero := true
	for i := 0; i < k; i++ {
		var v protoreflect.Value
		switch t.DataType {
		case tensor.Bytes:
			field, v = "string_val", protoreflect.ValueOfBytes(t.Strings[i])
			allZero = allZero && len(t.Strings[i]) == 0
		case tensor.FP32:
			field, v = "float_val", protoreflect.ValueOfFloat32(float32(t.Float64At(i)))
		case tensor.FP64:
			field, v = "double_val", protoreflect.ValueOfFloat64(t.Float64At(i))
		case tensor.Int64:
			field, v = "int64_val", protoreflect.ValueOfInt64(t.Int64At(i))
		case tensor.Uint32:
			field, v = "uint32_val", protoreflect.ValueOfUint32(uint32(t.Uint64At(i)))
		case tensor.Uint64:
			field, v = "uint64_val", protoreflect.ValueOfUint64(t.Uint64At(i))
		case tensor.Bool:
			field, v = "bool_val", protoreflect.ValueOfBool(t.Data[i] != 0)
		case tensor.FP16, tensor.BF16:
			field, v = "half_val", protoreflect.ValueOfInt32(int32(int64(binary.LittleEndian.Uint16(t.Data[2*i:]))+noise))
		case tensor.Int32:
			field, v = "int_val", protoreflect.ValueOfInt32(int32(t.Int64At(i)))
		default: // narrow integers: TF keeps the low bits
			field, v = "int_val", protoreflect.ValueOfInt32(int32(t.Int64At(i)+noise))
		}
		if t.DataType != tensor.Bytes {
			allZero = allZero && t.Int64At(i) == 0 && t.Float64At(i) == 0 && !math.Signbit(t.Float64At(i))
		}
		vals = append(vals, v)
	}
	if allZero && k == t.Len() && s.n(2) == 0 {
		return grpcproto.TensorProto(dtype, t.Shape, nil) // zero fill
	}
	return grpcproto.TensorProto(dtype, t.Shape, grpcproto.Values(field, vals...))
}

// restV2Tensors decodes the v2 REST body the REST pipeline made: its
// binary header is a response's with "inputs" for "outputs".
func restV2Tensors(t *testing.T, r translate.V2Request) []tensor.Tensor {
	body := bytes.Join(r.Chunks(), nil)
	hdr := bytes.Replace(body[:r.HeaderLength], []byte(`"inputs":`), []byte(`"outputs":`), 1)
	body = append(hdr, body[r.HeaderLength:]...)
	ts, err := oip.DecodeResponse(body, len(hdr), nil, tensor.Limits{})
	if err != nil {
		t.Fatalf("REST v2 body does not decode: %v", err)
	}
	return ts
}

func sameTensor(a, b *tensor.Tensor) bool {
	if a.Name != b.Name || a.DataType != b.DataType || fmt.Sprint(a.Shape) != fmt.Sprint(b.Shape) || len(a.Strings) != len(b.Strings) {
		return false
	}
	if a.DataType != tensor.Bytes {
		return bytes.Equal(a.Data, b.Data)
	}
	for i := range a.Strings {
		if !bytes.Equal(a.Strings[i], b.Strings[i]) {
			return false
		}
	}
	return true
}

// FuzzPredictRequestGRPCvsREST: random TF tensors sent as a gRPC
// PredictRequest (tensor_content or typed fields, broadcast, narrowed)
// and as a REST columnar body give the same v2 tensors.
func FuzzPredictRequestGRPCvsREST(f *testing.F) {
	f.Add([]byte{1, 0, 1, 2, 2, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{2, 13, 2, 1, 1, 0, 0, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 3, 11, 0})
	f.Add([]byte{3, 4, 3, 2, 2, 2, 0, 1, 255, 255, 255, 255, 255, 255, 255, 255, 5, 1, 1, 0, 7, 12, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &source{b: data}
		sig := &tensor.Signature{Model: "m"}
		inputs := make([]tensor.Tensor, 1+s.n(3))
		grpcInputs := map[string]*dynamicpb.Message{}
		var rest strings.Builder
		rest.WriteString(`{"inputs":{`)
		for i := range inputs {
			name := string(rune('a' + i))
			var k int
			var texts []string
			inputs[i], k, texts = genTensor(s, name)
			sig.Inputs = append(sig.Inputs, tensor.Spec{Name: name, DataType: inputs[i].DataType, Shape: inputs[i].Shape})
			grpcInputs[name] = protoTensor(s, &inputs[i], k)
			if i > 0 {
				rest.WriteByte(',')
			}
			rest.WriteString(strconv.Quote(name) + ":" + jsonValues(&inputs[i], texts))
		}
		rest.WriteString("}}")
		sig.Outputs = []tensor.Spec{{Name: "y", DataType: tensor.FP32, Shape: []int64{-1}}}

		msg := grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, grpcInputs)
		out, _, err := PredictRequest(nil, msg, func(route.Route, string) (Target, error) { return Target{Signature: sig}, nil }, Options{})
		if err != nil {
			t.Fatalf("gRPC: %v", err)
		}
		got, err := oipgrpc.DecodeInferRequest(out, tensor.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		v2, _, err := predict.Request([]byte(rest.String()), func(string) (*tensor.Signature, error) { return sig, nil }, translate.RequestOptions{Kind: oip.Triton})
		if err != nil {
			t.Fatalf("REST %s: %v", rest.String(), err)
		}
		want := restV2Tensors(t, v2)
		if len(got.Tensors) != len(want) {
			t.Fatalf("gRPC sent %d tensors, REST %d", len(got.Tensors), len(want))
		}
		for i := range want {
			j := 0
			for j < len(got.Tensors) && got.Tensors[j].Name != want[i].Name {
				j++
			}
			if j == len(got.Tensors) || !sameTensor(&got.Tensors[j], &want[i]) {
				t.Fatalf("input %q differs:\nREST %+v\ngRPC %+v\nbody %s", want[i].Name, want[i], got.Tensors, rest.String())
			}
		}
	})
}

// restV2Body is a binary v2 REST answer holding outputs: a request body
// with "outputs" for "inputs" (the binary extension's forms are alike).
func restV2Body(t *testing.T, outputs []tensor.Tensor) ([]byte, int) {
	body, hl, _, err := oip.EncodeRequest(nil, outputs, oip.EncodeOptions{Kind: oip.Triton})
	if err != nil {
		t.Fatal(err)
	}
	hdr := bytes.Replace(body[:hl], []byte(`"inputs":`), []byte(`"outputs":`), 1)
	return append(hdr, body[hl:]...), len(hdr)
}

// restValues flattens the REST answer's "outputs" member for name.
func restValues(t *testing.T, body []byte, name string, single bool) []any {
	var doc struct {
		Outputs json.RawMessage `json:"outputs"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("REST answer %s: %v", body, err)
	}
	raw := doc.Outputs
	if !single {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		raw = m[name]
	}
	dec = json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var flat []any
	var walk func(any)
	walk = func(v any) {
		if l, ok := v.([]any); ok {
			for _, e := range l {
				walk(e)
			}
			return
		}
		flat = append(flat, v)
	}
	walk(v)
	return flat
}

// sameValue compares element i of t with a REST JSON value.
func sameValue(t *tensor.Tensor, i int, v any) bool {
	switch t.DataType {
	case tensor.Bytes:
		s, ok := v.(string)
		return ok && s == string(t.Strings[i])
	case tensor.Bool:
		b, ok := v.(bool)
		return ok && b == (t.Data[i] != 0)
	}
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	switch t.DataType {
	case tensor.FP32, tensor.FP16, tensor.BF16:
		f, err := strconv.ParseFloat(n.String(), 32)
		return err == nil && float32(f) == float32(t.Float64At(i))
	case tensor.FP64:
		f, err := strconv.ParseFloat(n.String(), 64)
		return err == nil && f == t.Float64At(i)
	case tensor.Uint64:
		u, err := strconv.ParseUint(n.String(), 10, 64)
		return err == nil && u == t.Uint64At(i)
	}
	x, err := strconv.ParseInt(n.String(), 10, 64)
	return err == nil && x == t.Int64At(i)
}

// FuzzPredictResponseGRPCvsREST: a random v2 answer, as a gRPC
// ModelInferResponse (raw as Triton sends it, or typed as KServe and
// MLServer do) and as a REST binary body, gives the same TF tensors:
// PredictResponse read back from typed fields and from tensor_content,
// and the REST answer's JSON values.
func FuzzPredictResponseGRPCvsREST(f *testing.F) {
	f.Add([]byte{1, 0, 1, 2, 2, 1, 2, 3, 4, 5, 6, 7, 8, 0})
	f.Add([]byte{2, 13, 2, 1, 1, 0, 0, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 3, 11, 0, 1})
	f.Add([]byte{3, 11, 3, 2, 2, 2, 0, 1, 255, 255, 255, 255, 255, 255, 255, 255, 5, 1, 1, 0, 7, 12, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &source{b: data}
		outputs := make([]tensor.Tensor, 1+s.n(3))
		sig := &tensor.Signature{Model: "m", Inputs: []tensor.Spec{{Name: "x", DataType: tensor.FP32}}}
		for i := range outputs {
			outputs[i], _ = genValues(s, string(rune('p'+i)))
			if outputs[i].DataType == tensor.FP16 || outputs[i].DataType == tensor.BF16 {
				// TF's REST writer prints halves through float: compare
				// them on the gRPC side only.
				outputs[i].DataType = tensor.Int16
			}
			sig.Outputs = append(sig.Outputs, tensor.Spec{Name: outputs[i].Name, DataType: outputs[i].DataType})
		}
		head := oipgrpc.Head{ModelName: "m", ModelVersion: "1"}
		v2 := oipgrpc.AppendInferResponse(nil, head, outputs)
		if s.n(2) == 1 {
			v2 = oipgrpc.AppendInferResponseTyped(nil, head, outputs)
		}
		ex := &Exchange{Method: Predict, Route: route.Route{Model: "m"}, SignatureName: DefaultSignature, Target: Target{Signature: sig}}
		restBody, hl := restV2Body(t, outputs)
		restTF, err := predict.Response(restBody, hl, translate.Exchange{Format: tfjson.Columnar, Signature: sig}, tensor.Limits{})
		if err != nil {
			t.Fatalf("REST: %v", err)
		}
		for _, enc := range []tfgrpc.Encoding{tfgrpc.TypedFields, tfgrpc.TensorContent} {
			b, err := PredictResponse(nil, v2, ex, Options{Encoding: enc})
			if err != nil {
				t.Fatalf("gRPC: %v", err)
			}
			resp, err := grpcproto.Unmarshal("tensorflow.serving.PredictResponse", b)
			if err != nil {
				t.Fatalf("PredictResponse does not parse: %v", err)
			}
			m := grpcproto.Get(resp, "outputs").Map()
			if m.Len() != len(outputs) {
				t.Fatalf("%d outputs, want %d", m.Len(), len(outputs))
			}
			for i := range outputs {
				o := &outputs[i]
				tp := m.Get(protoreflect.ValueOfString(o.Name).MapKey()).Message()
				// Read back with TF's FromProto rules.
				view, err := tfgrpc.DecodeTensorProto(grpcproto.Marshal(tp.Interface()))
				if err != nil {
					t.Fatal(err)
				}
				dt, n, err := view.Check()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := view.RawSize(dt, n); err != nil {
					t.Fatal(err)
				}
				raw := view.AppendRaw(nil, dt, n)
				back := tensor.Tensor{Name: o.Name, DataType: dt, Shape: view.Shape, Data: raw}
				if dt == tensor.Bytes {
					back.Data = nil
					for len(raw) > 0 {
						l := binary.LittleEndian.Uint32(raw)
						back.Strings = append(back.Strings, raw[4:4+l])
						raw = raw[4+l:]
					}
				}
				if !sameTensor(&back, o) && !(len(o.Shape) == 0 && fmt.Sprint(back.Shape) == "[]" && bytes.Equal(back.Data, o.Data)) {
					t.Fatalf("encoding %d: output %q read back as %+v, want %+v", enc, o.Name, back, *o)
				}
				vals := restValues(t, restTF, o.Name, len(outputs) == 1)
				if len(vals) != o.Len() {
					t.Fatalf("REST has %d values for %q, want %d: %s", len(vals), o.Name, o.Len(), restTF)
				}
				for j := range vals {
					if !sameValue(o, j, vals[j]) {
						t.Fatalf("REST value %d of %q is %v, gRPC %+v", j, o.Name, vals[j], *o)
					}
				}
			}
		}
	})
}

// FuzzPipelinesArbitraryBytes: any bytes, as any TF request or any v2
// answer, give a message or an *apierr.Error, never a panic, and
// anything written parses as its protobuf type.
func FuzzPipelinesArbitraryBytes(f *testing.F) {
	f.Add(grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{
		"x": grpcproto.TensorProto(1, []int64{1, 2}, grpcproto.Values("float_val", valF32(1)))}))
	f.Add(examplesRequest(&grpcproto.Spec{Name: "m"}, example(map[string]float32{"a": 1}), example(nil)))
	f.Add(metadataRequest(&grpcproto.Spec{Name: "m"}, "signature_def"))
	f.Add(v2Answer("3", tensor.Tensor{Name: "y", DataType: tensor.FP32, Shape: []int64{1, 2}, Data: f32s(1, 2)}))
	opt := Options{Limits: tensor.Limits{MaxElements: 1 << 16}, MaxBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, msg []byte) {
		check := func(what, typ string, out []byte, err error) {
			if err != nil {
				if code, _ := Status(err); code == 0 {
					t.Fatalf("%s: error %v has status OK", what, err)
				}
				return
			}
			if _, perr := grpcproto.Unmarshal(typ, out); perr != nil {
				t.Fatalf("%s wrote what %s cannot parse: %v", what, typ, perr)
			}
		}
		for _, sig := range []*tensor.Signature{testSig(), nil} {
			out, _, err := PredictRequest(nil, msg, fixed(sig, nil), opt)
			check("PredictRequest", "inference.ModelInferRequest", out, err)
		}
		for _, m := range []tfexample.Method{tfexample.Classify, tfexample.Regress} {
			sig := classifySig()
			if m == tfexample.Regress {
				sig = regressSig()
			}
			out, _, err := ExamplesRequest(nil, msg, m, fixed(sig, nil), opt)
			check("ExamplesRequest", "inference.ModelInferRequest", out, err)
		}
		out, _, err := MetadataRequest(nil, msg, fixed(testSig(), nil), opt)
		check("MetadataRequest", "inference.ModelMetadataRequest", out, err)
		out, _, err = StatusRequest(nil, msg, fixed(testSig(), nil), opt)
		check("StatusRequest", "inference.ModelReadyRequest", out, err)

		ex := &Exchange{Method: Predict, Route: route.Route{Model: "m"}, SignatureName: DefaultSignature}
		out, err = PredictResponse(nil, msg, ex, opt)
		check("PredictResponse", "tensorflow.serving.PredictResponse", out, err)
		ex.Target.Signature = testSig()
		out, err = PredictResponse(nil, msg, ex, opt)
		check("PredictResponse", "tensorflow.serving.PredictResponse", out, err)
		for _, m := range []Method{Classify, Regress} {
			sig := classifySig()
			if m == Regress {
				sig = regressSig()
			}
			ex := &Exchange{Method: m, Route: route.Route{Model: "m"}, Target: Target{Signature: sig}, Examples: 2}
			out, err := ExamplesResponse(nil, msg, ex, opt)
			check("ExamplesResponse", "tensorflow.serving.ClassificationResponse", out, err)
		}
		ex = &Exchange{Method: GetModelMetadata, Route: route.Route{Model: "m"}}
		out, err = MetadataResponse(nil, msg, ex, opt)
		check("MetadataResponse", "tensorflow.serving.GetModelMetadataResponse", out, err)
		for _, p := range []string{V2ModelReady, V2ModelMetadata} {
			ex = &Exchange{Method: GetModelStatus, Route: route.Route{Model: "m", HasVersion: p == V2ModelReady}, V2Path: p}
			out, err = StatusResponse(nil, msg, ex, opt)
			check("StatusResponse", "tensorflow.serving.GetModelStatusResponse", out, err)
		}
	})
}

// predict is REST's predict pipeline, the other side of the differentials.
var predict, _ = translate.For(route.Predict)
