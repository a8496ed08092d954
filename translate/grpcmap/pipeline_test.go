package grpcmap

import (
	"bytes"
	"encoding/binary"
	"testing"

	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/internal/grpcproto"
	"github.com/tfsbridge/tfsbridge/translate/oipgrpc"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// One exchange per method as a transport runs it, the request written
// after a 5-byte gRPC message prefix.
func TestRequestResponseDispatch(t *testing.T) {
	x := grpcproto.TensorProto(1, []int64{1, 2}, grpcproto.Content(f32s(1, 2)))
	tests := []struct {
		m        Method
		msg      []byte
		sig      *tensor.Signature
		v2Path   string
		answer   []byte
		respType string
	}{
		{Predict, grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{"x": x}), testSig(), V2ModelInfer,
			v2Answer("1", tensor.Tensor{Name: "y", DataType: tensor.FP32, Shape: []int64{1, 2}, Data: f32s(3, 4)},
				tensor.Tensor{Name: "z", DataType: tensor.Bytes, Shape: []int64{1}, Strings: [][]byte{nil}}), "tensorflow.serving.PredictResponse"},
		{Classify, examplesRequest(&grpcproto.Spec{Name: "m"}, nil, example(nil)), classifySig(), V2ModelInfer,
			v2Answer("1", tensor.Tensor{Name: "classes", DataType: tensor.Bytes, Shape: []int64{1, 2}, Strings: [][]byte{[]byte("a"), []byte("b")}},
				tensor.Tensor{Name: "scores", DataType: tensor.FP32, Shape: []int64{1, 2}, Data: f32s(1, 0)}), "tensorflow.serving.ClassificationResponse"},
		{Regress, examplesRequest(&grpcproto.Spec{Name: "m"}, nil, example(nil)), regressSig(), V2ModelInfer,
			v2Answer("1", tensor.Tensor{Name: "outputs", DataType: tensor.FP32, Shape: []int64{1}, Data: f32s(2)}), "tensorflow.serving.RegressionResponse"},
		{GetModelMetadata, metadataRequest(&grpcproto.Spec{Name: "m"}, "signature_def"), testSig(), V2ModelMetadata,
			oipgrpc.AppendModelMetadata(nil, testSig()), "tensorflow.serving.GetModelMetadataResponse"},
		{GetModelStatus, statusRequest(&grpcproto.Spec{Name: "m", Version: v(1)}), testSig(), V2ModelReady,
			oipgrpc.AppendModelReady(nil, true), "tensorflow.serving.GetModelStatusResponse"},
	}
	for _, tt := range tests {
		t.Run(tt.m.String(), func(t *testing.T) {
			prefix := []byte{0, 0, 0, 0, 0}
			out, ex, err := Request(prefix, tt.m, tt.msg, fixed(tt.sig, nil), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if ex.V2Path != tt.v2Path || !bytes.Equal(out[:5], prefix) {
				t.Errorf("V2Path %s, prefix % x", ex.V2Path, out[:5])
			}
			binary.BigEndian.PutUint32(out[1:5], uint32(len(out)-5))
			b, err := Response(nil, tt.answer, ex, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := grpcproto.Unmarshal(tt.respType, b); err != nil || len(b) == 0 {
				t.Errorf("answer (%d bytes) does not parse as %s: %v", len(b), tt.respType, err)
			}
		})
	}
	for _, m := range []Method{MultiInference, HandleReloadConfigRequest} {
		_, _, err := Request(nil, m, nil, fixed(testSig(), nil), Options{})
		if e := apierr.As(err); e == nil || e.Code != apierr.Unimplemented {
			t.Errorf("%s: %v, want UNIMPLEMENTED", m, err)
		}
	}
}

// MLServer's numpy codec answers a rank-1 output as [N,1]; the signature
// says [N], and so does the TF answer (as over REST).
func TestPredictResponseMLServerReshape(t *testing.T) {
	sig := &tensor.Signature{Inputs: testSig().Inputs, Outputs: []tensor.Spec{{Name: "y", DataType: tensor.FP32, Shape: []int64{-1}}}}
	ex := &Exchange{Method: Predict, Target: Target{Signature: sig}}
	ex.Route.Model = "m"
	b, err := PredictResponse(nil, v2Answer("", tensor.Tensor{Name: "y", DataType: tensor.FP32, Shape: []int64{2, 1}, Data: f32s(1, 2)}), ex, Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := grpcproto.Unmarshal("tensorflow.serving.PredictResponse", b)
	y := mapGet(resp, "outputs", "y")
	if dims := grpcproto.Get(grpcproto.Get(y, "tensor_shape").Message(), "dim").List(); dims.Len() != 1 {
		t.Errorf("shape %v, want [2]", dims)
	}
}
