package oipgrpc

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/internal/grpcproto"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

func f32s(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func get(m protoreflect.Message, name string) protoreflect.Value {
	return m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(name)))
}

func TestInferRequestDecodedByProtobuf(t *testing.T) {
	inputs := []tensor.Tensor{
		{Name: "x", DataType: tensor.FP32, Shape: []int64{1, 2}, Data: f32s(1, 2)},
		{Name: "s", DataType: tensor.Bytes, Shape: []int64{2}, Strings: [][]byte{[]byte("ab"), {}}},
		{Name: "b", DataType: tensor.Bool, Data: []byte{7}},
	}
	b := AppendInferRequestTensors(nil, Head{ModelName: "m", ModelVersion: "3"}, inputs, []string{"y"})
	m, err := grpcproto.Unmarshal("inference.ModelInferRequest", b)
	if err != nil {
		t.Fatal(err)
	}
	if get(m, "model_name").String() != "m" || get(m, "model_version").String() != "3" {
		t.Errorf("head: %v", m)
	}
	ins := get(m, "inputs").List()
	raw := get(m, "raw_input_contents").List()
	if ins.Len() != 3 || raw.Len() != 3 {
		t.Fatalf("%d inputs, %d raw", ins.Len(), raw.Len())
	}
	wantRaw := [][]byte{f32s(1, 2), []byte("\x02\x00\x00\x00ab\x00\x00\x00\x00"), {1}}
	for i, want := range []struct {
		name, dt string
		shape    []int64
	}{{"x", "FP32", []int64{1, 2}}, {"s", "BYTES", []int64{2}}, {"b", "BOOL", nil}} {
		in := ins.Get(i).Message()
		shape := get(in, "shape").List()
		if get(in, "name").String() != want.name || get(in, "datatype").String() != want.dt || shape.Len() != len(want.shape) {
			t.Errorf("input %d: %v", i, in)
		}
		for j := range want.shape {
			if shape.Get(j).Int() != want.shape[j] {
				t.Errorf("input %d shape %v", i, shape)
			}
		}
		if !bytes.Equal(raw.Get(i).Bytes(), wantRaw[i]) {
			t.Errorf("raw %d: % x, want % x", i, raw.Get(i).Bytes(), wantRaw[i])
		}
	}
	outs := get(m, "outputs").List()
	if outs.Len() != 1 || get(outs.Get(0).Message(), "name").String() != "y" {
		t.Errorf("outputs %v", outs)
	}
	// And back through our own decoder.
	dm, err := DecodeInferRequest(b, tensor.Limits{})
	if err != nil || len(dm.Tensors) != 3 || dm.Outputs[0] != "y" || string(dm.Tensors[1].Strings[0]) != "ab" {
		t.Errorf("DecodeInferRequest: %+v, %v", dm, err)
	}
}

// v2Resp builds a ModelInferResponse with the protobuf runtime.
func v2Resp(t *testing.T, outs []map[string]any, raw [][]byte) []byte {
	t.Helper()
	m := grpcproto.New("inference.ModelInferResponse")
	m.Set(m.Descriptor().Fields().ByName("model_name"), protoreflect.ValueOfString("m"))
	m.Set(m.Descriptor().Fields().ByName("model_version"), protoreflect.ValueOfString("7"))
	list := m.Mutable(m.Descriptor().Fields().ByName("outputs")).List()
	for _, o := range outs {
		om := list.NewElement().Message()
		fs := om.Descriptor().Fields()
		om.Set(fs.ByName("name"), protoreflect.ValueOfString(o["name"].(string)))
		om.Set(fs.ByName("datatype"), protoreflect.ValueOfString(o["datatype"].(string)))
		sl := om.Mutable(fs.ByName("shape")).List()
		for _, d := range o["shape"].([]int64) {
			sl.Append(protoreflect.ValueOfInt64(d))
		}
		if c, ok := o["contents"]; ok {
			cm := om.Mutable(fs.ByName("contents")).Message()
			field := cm.Descriptor().Fields().ByName(protoreflect.Name(o["field"].(string)))
			cl := cm.Mutable(field).List()
			for _, v := range c.([]protoreflect.Value) {
				cl.Append(v)
			}
		}
		list.Append(protoreflect.ValueOfMessage(om))
	}
	rl := m.Mutable(m.Descriptor().Fields().ByName("raw_output_contents")).List()
	for _, r := range raw {
		rl.Append(protoreflect.ValueOfBytes(r))
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func vals[T any](f func(T) protoreflect.Value, vs ...T) []protoreflect.Value {
	out := make([]protoreflect.Value, len(vs))
	for i, v := range vs {
		out[i] = f(v)
	}
	return out
}

func TestDecodeInferResponse(t *testing.T) {
	out := func(name, dt string, shape []int64) map[string]any {
		return map[string]any{"name": name, "datatype": dt, "shape": shape}
	}
	typed := func(name, dt string, shape []int64, field string, v []protoreflect.Value) map[string]any {
		o := out(name, dt, shape)
		o["field"], o["contents"] = field, v
		return o
	}
	tests := []struct {
		name    string
		msg     []byte
		want    []tensor.Tensor
		wantErr string
	}{
		{"raw (Triton)", v2Resp(t, []map[string]any{out("y", "FP32", []int64{2}), out("s", "BYTES", []int64{1})},
			[][]byte{f32s(1, 2), []byte("\x01\x00\x00\x00z")}),
			[]tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{2}, Data: f32s(1, 2)}, {Name: "s", DataType: tensor.Bytes, Shape: []int64{1}, Strings: [][]byte{[]byte("z")}}}, ""},
		{"typed fp32 (KServe)", v2Resp(t, []map[string]any{typed("y", "FP32", []int64{2}, "fp32_contents", vals(protoreflect.ValueOfFloat32, 1, 2))}, nil),
			[]tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{2}, Data: f32s(1, 2)}}, ""},
		{"typed int8 keeps low bits", v2Resp(t, []map[string]any{typed("y", "INT8", []int64{2}, "int_contents", vals(protoreflect.ValueOfInt32, -1, 5))}, nil),
			[]tensor.Tensor{{Name: "y", DataType: tensor.Int8, Shape: []int64{2}, Data: []byte{0xff, 5}}}, ""},
		{"typed uint16", v2Resp(t, []map[string]any{typed("y", "UINT16", []int64{1}, "uint_contents", vals(protoreflect.ValueOfUint32, 65535))}, nil),
			[]tensor.Tensor{{Name: "y", DataType: tensor.Uint16, Shape: []int64{1}, Data: []byte{0xff, 0xff}}}, ""},
		{"typed bytes", v2Resp(t, []map[string]any{typed("y", "BYTES", []int64{2}, "bytes_contents", vals(protoreflect.ValueOfBytes, []byte("a"), []byte("")))}, nil),
			[]tensor.Tensor{{Name: "y", DataType: tensor.Bytes, Shape: []int64{2}, Strings: [][]byte{[]byte("a"), {}}}}, ""},
		{"MLServer FP16 in bytes_contents", v2Resp(t, []map[string]any{typed("y", "FP16", []int64{2}, "bytes_contents", vals(protoreflect.ValueOfBytes, []byte{0, 0x3c, 0, 0xc0}))}, nil),
			[]tensor.Tensor{{Name: "y", DataType: tensor.FP16, Shape: []int64{2}, Data: []byte{0, 0x3c, 0, 0xc0}}}, ""},
		{"empty output, raw", v2Resp(t, []map[string]any{out("y", "FP32", []int64{0, 3})}, [][]byte{{}}),
			[]tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{0, 3}, Data: []byte{}}}, ""},
		{"raw size mismatch", v2Resp(t, []map[string]any{out("y", "FP32", []int64{2})}, [][]byte{f32s(1)}), nil, "raw contents bytes: want 8, have 4"},
		{"raw count mismatch", v2Resp(t, []map[string]any{out("y", "FP32", []int64{1}), out("z", "FP32", []int64{1})}, [][]byte{f32s(1)}), nil, "1 raw contents for 2 tensors"},
		{"typed count mismatch", v2Resp(t, []map[string]any{typed("y", "FP32", []int64{3}, "fp32_contents", vals(protoreflect.ValueOfFloat32, 1))}, nil), nil, "typed contents values: want 3, have 1"},
		{"typed values past the count", v2Resp(t, []map[string]any{typed("y", "INT64", []int64{2}, "int64_contents", vals(protoreflect.ValueOfInt64, 1, 2, 3, 4))}, nil), nil, "typed contents values: want 2, have 3"},
		{"unknown datatype", v2Resp(t, []map[string]any{out("y", "FP8", []int64{1})}, [][]byte{{1}}), nil, `unknown datatype "FP8"`},
		{"bytes element overruns", v2Resp(t, []map[string]any{out("y", "BYTES", []int64{1})}, [][]byte{[]byte("\x09\x00\x00\x00ab")}), nil, "raw BYTES element bytes"},
		{"negative dim", v2Resp(t, []map[string]any{out("y", "FP32", []int64{-1})}, [][]byte{{}}), nil, "negative dimension"},
		{"duplicate", v2Resp(t, []map[string]any{out("y", "FP32", []int64{0}), out("y", "FP32", []int64{0})}, nil), nil, `duplicate tensor "y"`},
		{"truncated", []byte{0x2a, 0x05, 0x0a}, nil, "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeInferResponse(tt.msg, tensor.Limits{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || apierr.As(err).Code != apierr.BadGateway {
					t.Fatalf("err = %v, want BadGateway containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.ModelName != "m" || m.ModelVersion != "7" || len(m.Tensors) != len(tt.want) {
				t.Fatalf("got %+v", m)
			}
			for i, w := range tt.want {
				g := m.Tensors[i]
				if g.Name != w.Name || g.DataType != w.DataType || !equalShape(g.Shape, w.Shape) || !bytes.Equal(g.Data, w.Data) || len(g.Strings) != len(w.Strings) {
					t.Errorf("tensor %d: %+v, want %+v", i, g, w)
				}
				for j := range w.Strings {
					if !bytes.Equal(g.Strings[j], w.Strings[j]) {
						t.Errorf("tensor %d string %d: %q", i, j, g.Strings[j])
					}
				}
			}
		})
	}
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

func TestDecodeInferResponseLimit(t *testing.T) {
	msg := v2Resp(t, []map[string]any{{"name": "y", "datatype": "BYTES", "shape": []int64{1 << 40}}}, [][]byte{{}})
	if _, err := DecodeInferResponse(msg, tensor.Limits{MaxElements: 1000}); err == nil || !strings.Contains(err.Error(), "more than 1000 elements") {
		t.Errorf("err = %v", err)
	}
}

func TestModelMetadataAndReady(t *testing.T) {
	m := grpcproto.New("inference.ModelMetadataResponse")
	fs := m.Descriptor().Fields()
	m.Set(fs.ByName("name"), protoreflect.ValueOfString("m"))
	m.Mutable(fs.ByName("versions")).List().Append(protoreflect.ValueOfString("1"))
	for _, io := range []struct {
		field, name, dt string
		shape           []int64
	}{{"inputs", "x", "fp32", []int64{-1, 3}}, {"outputs", "y", "BYTES", nil}} {
		l := m.Mutable(fs.ByName(protoreflect.Name(io.field))).List()
		tm := l.NewElement().Message()
		tf := tm.Descriptor().Fields()
		tm.Set(tf.ByName("name"), protoreflect.ValueOfString(io.name))
		tm.Set(tf.ByName("datatype"), protoreflect.ValueOfString(io.dt))
		for _, d := range io.shape {
			tm.Mutable(tf.ByName("shape")).List().Append(protoreflect.ValueOfInt64(d))
		}
		l.Append(protoreflect.ValueOfMessage(tm))
	}
	b, _ := proto.Marshal(m)
	sig, err := DecodeModelMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	if sig.Model != "m" || len(sig.Versions) != 1 || !sig.Batched || sig.Inputs[0].DataType != tensor.FP32 ||
		!equalShape(sig.Inputs[0].Shape, []int64{-1, 3}) || sig.Outputs[0].Name != "y" || sig.Outputs[0].DataType != tensor.Bytes {
		t.Errorf("sig = %+v", sig)
	}
	again, err := DecodeModelMetadata(AppendModelMetadata(nil, sig))
	if err != nil || again.Inputs[0].Name != "x" || again.Outputs[0].DataType != tensor.Bytes {
		t.Errorf("round trip: %+v, %v", again, err)
	}
	bad := AppendModelMetadata(nil, &tensor.Signature{Inputs: []tensor.Spec{{Name: "x", DataType: tensor.FP32, Shape: []int64{-2}}}})
	if _, err := DecodeModelMetadata(bad); err == nil || !strings.Contains(err.Error(), "invalid dimension -2") {
		t.Errorf("dim -2: %v", err)
	}
	for _, ready := range []bool{true, false} {
		if got, err := DecodeModelReady(AppendModelReady(nil, ready)); got != ready || err != nil {
			t.Errorf("ready %v: %v %v", ready, got, err)
		}
	}
	name, version, err := DecodeModelRequest(AppendModelRequest(nil, "m", "2"))
	if name != "m" || version != "2" || err != nil {
		t.Errorf("model request: %q %q %v", name, version, err)
	}
}
