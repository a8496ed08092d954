package grpcmap

import (
	"encoding/binary"
	"math"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/internal/grpcproto"
	"github.com/tfsbridge/tfsbridge/translate/oipgrpc"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

func f32s(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func f64s(vs ...float64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

// testSig is a model with one FP32 input and two outputs, as Triton's
// metadata describes a batching model.
func testSig() *tensor.Signature {
	return &tensor.Signature{
		Model: "m", Versions: []string{"1", "3"}, Batched: true,
		Inputs: []tensor.Spec{{Name: "x", DataType: tensor.FP32, Shape: []int64{-1, 2}}},
		Outputs: []tensor.Spec{
			{Name: "y", DataType: tensor.FP32, Shape: []int64{-1, 2}},
			{Name: "z", DataType: tensor.Bytes, Shape: []int64{-1}},
		},
	}
}

// fixed is a Resolver for one model with one signature, serving_default;
// it records the route it was asked for.
func fixed(sig *tensor.Signature, asked *route.Route) Resolver {
	return func(r route.Route, name string) (Target, error) {
		if asked != nil {
			*asked = r
		}
		if r.Model != "m" {
			return Target{}, apierr.New(apierr.NotFound, "Servable not found for request: "+r.Servable())
		}
		if name != DefaultSignature && name != "" {
			return Target{}, ErrUnknownSignature
		}
		return Target{Signature: sig}, nil
	}
}

func v(x int64) *int64 { return &x }

var (
	valF32 = func(x float32) protoreflect.Value { return protoreflect.ValueOfFloat32(x) }
	valI32 = func(x int32) protoreflect.Value { return protoreflect.ValueOfInt32(x) }
	valStr = func(x string) protoreflect.Value { return protoreflect.ValueOfString(x) }
)

// decodeV2 decodes a ModelInferRequest with the protobuf runtime.
func decodeV2(t *testing.T, b []byte) *dynamicpb.Message {
	t.Helper()
	m, err := grpcproto.Unmarshal("inference.ModelInferRequest", b)
	if err != nil {
		t.Fatalf("v2 request does not parse: %v", err)
	}
	return m
}

// v2Answer is a Triton-shaped ModelInferResponse.
func v2Answer(version string, outputs ...tensor.Tensor) []byte {
	return oipgrpc.AppendInferResponse(nil, oipgrpc.Head{ModelName: "m", ModelVersion: version}, outputs)
}

// wantErr checks err's code and message.
func wantErr(t *testing.T, err error, code apierr.Code, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v %q", code, msg)
	}
	e := apierr.As(err)
	if e.Code != code || e.Msg != msg {
		t.Fatalf("got %v %q\nwant %v %q", e.Code, e.Msg, code, msg)
	}
}
