package oipgrpc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/internal/grpcproto"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// FuzzDecodeInferResponse: any bytes either fail to decode, or decode to
// valid tensors that the protobuf runtime agrees the message holds (the
// same names, datatypes and shapes), and that survive a round trip
// through AppendInferResponse. Bytes the protobuf runtime refuses are
// refused.
func FuzzDecodeInferResponse(f *testing.F) {
	f.Add(AppendInferResponse(nil, Head{ModelName: "m", ModelVersion: "1"}, []tensor.Tensor{
		{Name: "y", DataType: tensor.FP32, Shape: []int64{1, 2}, Data: f32s(1, 2)},
		{Name: "s", DataType: tensor.Bytes, Shape: []int64{1}, Strings: [][]byte{[]byte("ab")}}}))
	f.Add(AppendInferResponseTyped(nil, Head{ID: "x"}, []tensor.Tensor{
		{Name: "i", DataType: tensor.Int16, Shape: []int64{2}, Data: []byte{1, 0, 0xff, 0xff}},
		{Name: "h", DataType: tensor.FP16, Shape: []int64{1}, Data: []byte{0, 0x3c}}}))
	f.Fuzz(func(t *testing.T, msg []byte) {
		pm, perr := grpcproto.Unmarshal("inference.ModelInferResponse", msg)
		m, err := DecodeInferResponse(msg, tensor.Limits{MaxElements: 1 << 16})
		if errors.Is(perr, grpcproto.ErrRuntime) {
			return // no oracle for these bytes; the decoder did not panic
		}
		if perr != nil && err == nil {
			t.Fatalf("protobuf refuses (%v), DecodeInferResponse accepts", perr)
		}
		if err != nil {
			return
		}
		outs := grpcproto.Get(pm, "outputs").List()
		if outs.Len() != len(m.Tensors) || grpcproto.Get(pm, "model_name").String() != m.ModelName {
			t.Fatalf("protobuf sees %d outputs, decoder %d", outs.Len(), len(m.Tensors))
		}
		for i := range m.Tensors {
			tt := &m.Tensors[i]
			if err := tt.Validate(); err != nil {
				t.Fatalf("decoded tensor invalid: %v", err)
			}
			o := outs.Get(i).Message()
			shape := grpcproto.Get(o, "shape").List()
			if grpcproto.Get(o, "name").String() != tt.Name || grpcproto.Get(o, "datatype").String() != tt.DataType.String() || shape.Len() != len(tt.Shape) {
				t.Fatalf("output %d: protobuf %v, decoder %+v", i, o, tt)
			}
			for j := range tt.Shape {
				if shape.Get(j).Int() != tt.Shape[j] {
					t.Fatalf("output %d shape: protobuf %v, decoder %v", i, shape, tt.Shape)
				}
			}
		}
		again, err := DecodeInferResponse(AppendInferResponse(nil, m.Head, m.Tensors), tensor.Limits{})
		if err != nil || len(again.Tensors) != len(m.Tensors) {
			t.Fatalf("round trip: %v", err)
		}
		for i := range m.Tensors {
			a, b := &m.Tensors[i], &again.Tensors[i]
			if a.Name != b.Name || a.DataType != b.DataType || !bytes.Equal(a.Data, b.Data) || len(a.Strings) != len(b.Strings) {
				t.Fatalf("round trip changed %+v into %+v", a, b)
			}
			for j := range a.Strings {
				if !bytes.Equal(a.Strings[j], b.Strings[j]) {
					t.Fatalf("round trip changed string %d of %q", j, a.Name)
				}
			}
		}
	})
}
