package e2e

import (
	"context"
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/test/internal/tfclient"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// dtypeValues are two elements of one datatype, edge values where the
// type has them: float64 for the floating types (FP16 and BF16 as their
// bits, a uint64), int64 for the signed, uint64 for the unsigned, bool and
// string.
type dtypeValues struct {
	tf   tfclient.DType
	a, b any
}

// grpcDTypes are spec §6.2's datatypes, v2 → TF, with the values sent.
var grpcDTypes = map[tensor.DataType]dtypeValues{
	tensor.FP32:   {tfclient.DTFloat, 1.5, -3.25},
	tensor.FP64:   {tfclient.DTDouble, 0.1, -1e300},
	tensor.FP16:   {tfclient.DTHalf, uint64(0x3e00), uint64(0xc000)}, // 1.5, -2
	tensor.BF16:   {tfclient.DTBfloat16, uint64(0x3fc0), uint64(0xc000)},
	tensor.Int8:   {tfclient.DTInt8, int64(-128), int64(127)},
	tensor.Int16:  {tfclient.DTInt16, int64(-32768), int64(32767)},
	tensor.Int32:  {tfclient.DTInt32, int64(math.MinInt32), int64(7)},
	tensor.Int64:  {tfclient.DTInt64, int64(math.MinInt64), int64(1<<53 + 1)},
	tensor.Uint8:  {tfclient.DTUint8, uint64(0), uint64(255)},
	tensor.Uint16: {tfclient.DTUint16, uint64(1), uint64(65535)},
	tensor.Uint32: {tfclient.DTUint32, uint64(3), uint64(math.MaxUint32)},
	tensor.Uint64: {tfclient.DTUint64, uint64(5), uint64(math.MaxUint64)},
	tensor.Bool:   {tfclient.DTBool, true, false},
	tensor.Bytes:  {tfclient.DTString, "ab", "\xff\x00c"},
}

// typedTensor is a TensorProto of dt and shape holding vals in the typed
// field TF Serving reads and writes for dt (spec §6.2): what a client
// puts there and what TF Serving answers by default.
func typedTensor(dt tfclient.DType, shape []int64, vals ...any) tfclient.TensorProto {
	t := tfclient.TensorProto{DType: dt, Shape: shape}
	for _, v := range vals {
		switch dt {
		case tfclient.DTFloat:
			t.FloatVal = append(t.FloatVal, float32(v.(float64)))
		case tfclient.DTDouble:
			t.DoubleVal = append(t.DoubleVal, v.(float64))
		case tfclient.DTHalf, tfclient.DTBfloat16:
			t.HalfVal = append(t.HalfVal, int32(v.(uint64)))
		case tfclient.DTInt8, tfclient.DTInt16, tfclient.DTInt32:
			t.IntVal = append(t.IntVal, int32(v.(int64)))
		case tfclient.DTUint8, tfclient.DTUint16:
			t.IntVal = append(t.IntVal, int32(v.(uint64)))
		case tfclient.DTInt64:
			t.Int64Val = append(t.Int64Val, v.(int64))
		case tfclient.DTUint32:
			t.Uint32Val = append(t.Uint32Val, uint32(v.(uint64)))
		case tfclient.DTUint64:
			t.Uint64Val = append(t.Uint64Val, v.(uint64))
		case tfclient.DTBool:
			t.BoolVal = append(t.BoolVal, v.(bool))
		case tfclient.DTString:
			t.StringVal = append(t.StringVal, []byte(v.(string)))
		}
	}
	return t
}

// madeTensor is make_tensor_proto of a numpy array of vals (spec §7):
// tensor_content, little-endian, for the fixed-width numeric types but
// bool and uint16; the typed field otherwise.
func madeTensor(v2 tensor.DataType, dv dtypeValues) tfclient.TensorProto {
	shape := []int64{2}
	var content []byte
	for _, v := range []any{dv.a, dv.b} {
		switch v2 {
		case tensor.FP32:
			content = binary.LittleEndian.AppendUint32(content, math.Float32bits(float32(v.(float64))))
		case tensor.FP64:
			content = binary.LittleEndian.AppendUint64(content, math.Float64bits(v.(float64)))
		case tensor.FP16, tensor.BF16, tensor.Int16:
			content = binary.LittleEndian.AppendUint16(content, uint16(toBits(v)))
		case tensor.Int8, tensor.Uint8:
			content = append(content, byte(toBits(v)))
		case tensor.Int32, tensor.Uint32:
			content = binary.LittleEndian.AppendUint32(content, uint32(toBits(v)))
		case tensor.Int64, tensor.Uint64:
			content = binary.LittleEndian.AppendUint64(content, toBits(v))
		default: // bool, uint16, strings: never tensor_content
			return typedTensor(dv.tf, shape, dv.a, dv.b)
		}
	}
	return tfclient.TensorProto{DType: dv.tf, Shape: shape, TensorContent: content}
}

func toBits(v any) uint64 {
	if i, ok := v.(int64); ok {
		return uint64(i)
	}
	return v.(uint64)
}

// TestGRPCEveryDType sends a tensor of every dtype of spec §6.2 through
// every transport (the Envoy stand-in in BUFFERED and FULL_DUPLEX_STREAMED
// modes, and the TF gRPC listener) to the mock's identity models in each
// server's habits, first as make_tensor_proto builds it, then in the typed
// fields with fewer values than the shape (TF's repeat-last), and reads
// the answer as a TF client does: every value back in TF Serving's
// default typed field. BF16 only on Triton, the one server that has it.
func TestGRPCEveryDType(t *testing.T) {
	for _, kind := range []string{triton, kserve, mlserver} {
		t.Run(kind, func(t *testing.T) {
			st := newGRPCStack(t, kind)
			for _, via := range grpcTransports {
				t.Run(via, func(t *testing.T) {
					c := st.clients[via]
					ctx := callContext(t)
					for _, form := range []string{"make_tensor_proto", "typed fields, broadcast"} {
						model, dtypes := "every_dtype", mockv2.EveryDType
						in := map[string]tfclient.TensorProto{}
						want := map[string]tfclient.TensorProto{}
						call := func(dt tensor.DataType, inName, outName string) {
							dv := grpcDTypes[dt]
							if form == "make_tensor_proto" {
								in[inName] = madeTensor(dt, dv)
								want[outName] = typedTensor(dv.tf, []int64{2}, dv.a, dv.b)
							} else {
								in[inName] = typedTensor(dv.tf, []int64{3}, dv.a, dv.b)
								want[outName] = typedTensor(dv.tf, []int64{3}, dv.a, dv.b, dv.b)
							}
						}
						for _, dt := range dtypes {
							name := strings.ToLower(dt.String())
							call(dt, "in_"+name, "out_"+name)
						}
						if len(in) != len(grpcDTypes)-1 {
							t.Fatalf("every_dtype has %d dtypes, spec §6.2 %d but BF16", len(in), len(grpcDTypes)-1)
						}
						checkDTypePredict(ctx, t, c, model, form, in, want)
						if kind == triton {
							in, want = map[string]tfclient.TensorProto{}, map[string]tfclient.TensorProto{}
							call(tensor.BF16, "x", "y")
							checkDTypePredict(ctx, t, c, "identity_bf16", form, in, want)
						}
					}
				})
			}
		})
	}
}

func checkDTypePredict(ctx context.Context, t *testing.T, c *tfclient.Client, model, form string, in, want map[string]tfclient.TensorProto) {
	t.Helper()
	p, err := c.Predict(ctx, tfclient.PredictRequest(tfclient.Spec(model), in))
	if err != nil {
		t.Fatalf("%s, %s: %v", model, form, err)
	}
	if p.ModelSpec.Name != model || p.ModelSpec.SignatureName != "serving_default" {
		t.Errorf("%s, %s: model_spec %+v", model, form, p.ModelSpec)
	}
	if len(p.Outputs) != len(want) {
		t.Errorf("%s, %s: %d outputs, want %d", model, form, len(p.Outputs), len(want))
	}
	for name, w := range want {
		if got := p.Outputs[name]; !reflect.DeepEqual(got, w) {
			t.Errorf("%s, %s: %s = %+v\nwant %+v", model, form, name, got, w)
		}
	}
}
