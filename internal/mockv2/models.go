package mockv2

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/x448/float16"
)

// model is one sample model. Shapes are given as a Triton model config
// declares them: without the batch dimension, which metadata prepends as
// -1 when maxBatch > 0.
type model struct {
	name     string
	platform string
	// maxBatch is Triton's max_batch_size; 0 means the model does not batch
	// and its dims are the full shapes.
	maxBatch int64
	inputs   []tensor.Spec
	outputs  []tensor.Spec
	// run computes the outputs (in outputs order) from inputs that were
	// validated against the model (in inputs order, full shapes).
	run func(in []tensor.Tensor) []tensor.Tensor
	// runErr is run for models that can refuse their input (the examples
	// models: a tf.Example without the feature they need); its error is
	// the model's 400.
	runErr func(in []tensor.Tensor) ([]tensor.Tensor, error)
	// slow models sleep Options.Delay before answering (a test hook).
	slow bool
	// garbage models answer a malformed 200 response (a test hook).
	garbage bool
	// opaque models publish no tensors in their metadata, as KServe's
	// built-in predictors (sklearn, xgboost) do; they still check them.
	opaque bool
}

// metaShape is the shape metadata reports for config dims.
func (m *model) metaShape(dims []int64) []int64 {
	if m.maxBatch > 0 {
		return append([]int64{-1}, dims...)
	}
	return slices.Clone(dims)
}

func (m *model) input(name string) (int, *tensor.Spec) {
	for i := range m.inputs {
		if m.inputs[i].Name == name {
			return i, &m.inputs[i]
		}
	}
	return -1, nil
}

func (m *model) output(name string) (int, *tensor.Spec) {
	for i := range m.outputs {
		if m.outputs[i].Name == name {
			return i, &m.outputs[i]
		}
	}
	return -1, nil
}

func spec(name string, dt tensor.DataType, dims ...int64) tensor.Spec {
	return tensor.Spec{Name: name, DataType: dt, Shape: dims}
}

// sampleModels builds the model table. Every kind serves the same models;
// only the wire behaviour differs.
func sampleModels() map[string]*model {
	list := []*model{
		{
			// TF Serving's example: y = 0.5·x + 2. On Triton a batch of
			// scalars cannot be declared with max_batch_size > 0 (dims may
			// not be empty), so it is a non-batching model with one
			// variable dimension: metadata shape [-1] on every kind.
			name: "half_plus_two", platform: "tensorflow_savedmodel",
			inputs:  []tensor.Spec{spec("x", tensor.FP32, -1)},
			outputs: []tensor.Spec{spec("y", tensor.FP32, -1)},
			run:     runHalfPlusTwo,
		},
		{
			// Triton's "simple" example model.
			name: "simple", platform: "onnxruntime_onnx", maxBatch: 8,
			inputs:  []tensor.Spec{spec("INPUT0", tensor.Int32, 16), spec("INPUT1", tensor.Int32, 16)},
			outputs: []tensor.Spec{spec("OUTPUT0", tensor.Int32, 16), spec("OUTPUT1", tensor.Int32, 16)},
			run:     runSimple,
		},
		{
			// BYTES in, BYTES out; "echo_bytes" (reversed bytes, so usually
			// not UTF-8) exercises TF Serving's _bytes → {"b64": ...} rule.
			name: "bytes_echo", platform: "python",
			inputs:  []tensor.Spec{spec("text", tensor.Bytes, -1)},
			outputs: []tensor.Spec{spec("echo", tensor.Bytes, -1), spec("echo_bytes", tensor.Bytes, -1)},
			run:     runBytesEcho,
		},
		{
			// FP16 in and out: y = 2·x.
			name: "half_times_two", platform: "tensorrt_plan", maxBatch: 8,
			inputs:  []tensor.Spec{spec("x", tensor.FP16, 4)},
			outputs: []tensor.Spec{spec("y", tensor.FP16, 4)},
			run:     runHalfTimesTwo,
		},
		{
			// Several outputs of mixed datatypes, one named *_bytes.
			name: "multi_out", platform: "onnxruntime_onnx",
			inputs: []tensor.Spec{spec("x", tensor.FP32, -1, 2)},
			outputs: []tensor.Spec{
				spec("sum", tensor.FP32, -1),
				spec("label_bytes", tensor.Bytes, -1),
				spec("argmax", tensor.Int64, -1),
			},
			run: runMultiOut,
		},
		{
			// BOOL, INT64 and FP64, batched with per-item dims [1].
			name: "mixed_types", platform: "pytorch_libtorch", maxBatch: 8,
			inputs: []tensor.Spec{
				spec("flag", tensor.Bool, 1),
				spec("count", tensor.Int64, 1),
				spec("value", tensor.FP64, 1),
			},
			outputs: []tensor.Spec{
				spec("not_flag", tensor.Bool, 1),
				spec("count_plus_one", tensor.Int64, 1),
				spec("scaled", tensor.FP64, 1),
			},
			run: runMixedTypes,
		},
		{
			// Non-batching, fixed shape.
			name: "fixed3", platform: "onnxruntime_onnx",
			inputs:  []tensor.Spec{spec("x", tensor.FP32, 3)},
			outputs: []tensor.Spec{spec("reversed", tensor.FP32, 3), spec("total", tensor.FP32, 1)},
			run:     runFixed3,
		},
		{
			// INT64 identity (Triton's simple_identity_int64 shape): exact
			// 64-bit integers through JSON and binary.
			name: "identity_int64", platform: "onnxruntime_onnx", maxBatch: 8,
			inputs:  []tensor.Spec{spec("INPUT0", tensor.Int64, -1)},
			outputs: []tensor.Spec{spec("OUTPUT0", tensor.Int64, -1)},
			run:     runIdentity,
		},
		{
			// Every datatype the three servers share, one identity
			// tensor each (out_<name> = in_<name>): what a TF client's
			// tensors of every dtype come back as, through any transport.
			name: "every_dtype", platform: "python",
			inputs: everyDTypeSpecs("in_"), outputs: everyDTypeSpecs("out_"),
			run: runIdentity,
		},
		{
			// BF16 identity: Triton's alone among the three (KServe and
			// MLServer have no BF16).
			name: "identity_bf16", platform: "pytorch_libtorch",
			inputs:  []tensor.Spec{spec("x", tensor.BF16, -1)},
			outputs: []tensor.Spec{spec("y", tensor.BF16, -1)},
			run:     runIdentity,
		},
		{
			// KServe's test model (test_server.py FP16OutputModel): FP32 in,
			// the same values as FP16 and FP32 out, flattened.
			name: "FP16OutputModel", platform: "python",
			inputs:  []tensor.Spec{spec("fp32_input", tensor.FP32, -1, 4)},
			outputs: []tensor.Spec{spec("fp16_output", tensor.FP16, -1), spec("fp32_output", tensor.FP32, -1)},
			run:     runFP16Output,
		},
		{
			// KServe's test model (test_server.py FP16InputModel).
			name: "FP16InputModel", platform: "python",
			inputs:  []tensor.Spec{spec("fp16_input", tensor.FP16, -1, 4), spec("str_input", tensor.Bytes, -1, 4)},
			outputs: []tensor.Spec{spec("str_output", tensor.Bytes, -1), spec("fp32_output", tensor.FP32, -1)},
			run:     runFP16Input,
		},
		{
			// An image classifier's shape: one 224×224 RGB image per batch
			// item in, 1000 class scores out (what the whole-path
			// benchmark sends). Score k of an image is its mean pixel
			// value plus k/1000: cheap, deterministic, checkable.
			name: "image_classifier", platform: "onnxruntime_onnx", maxBatch: 8,
			inputs:  []tensor.Spec{spec("image", tensor.FP32, 224, 224, 3)},
			outputs: []tensor.Spec{spec("scores", tensor.FP32, 1000)},
			run:     runImageClassifier,
		},
		{
			// A classifier as an Estimator export looks on a v2 server:
			// serialized tf.Examples in, classes and scores out.
			name: "linear_classifier", platform: "tensorflow_savedmodel",
			inputs:  []tensor.Spec{spec("inputs", tensor.Bytes, -1)},
			outputs: []tensor.Spec{spec("classes", tensor.Bytes, -1, -1), spec("scores", tensor.FP32, -1, -1)},
			runErr:  runLinearClassifier,
		},
		{
			// A regressor over tf.Examples: outputs = w·x + b.
			name: "linear_regressor", platform: "tensorflow_savedmodel",
			inputs:  []tensor.Spec{spec("inputs", tensor.Bytes, -1)},
			outputs: []tensor.Spec{spec("outputs", tensor.FP32, -1)},
			runErr:  runLinearRegressor,
		},
		{
			// Test hook: answers after Options.Delay.
			name: "slow", platform: "python",
			inputs:  []tensor.Spec{spec("x", tensor.FP32, -1)},
			outputs: []tensor.Spec{spec("y", tensor.FP32, -1)},
			run:     runIdentity, slow: true,
		},
		{
			// y = 0.5·x + 2 again, publishing no tensors (model map tests
			// give its metadata explicitly).
			name: "opaque_half_plus_two", platform: "python",
			inputs:  []tensor.Spec{spec("input-0", tensor.FP32, -1)},
			outputs: []tensor.Spec{spec("y", tensor.FP32, -1)},
			run:     runHalfPlusTwo, opaque: true,
		},
		{
			// Test hook: answers 200 with a malformed body.
			name: "garbage", platform: "python",
			inputs:  []tensor.Spec{spec("x", tensor.FP32, -1)},
			outputs: []tensor.Spec{spec("y", tensor.FP32, -1)},
			run:     runIdentity, garbage: true,
		},
	}
	out := make(map[string]*model, len(list))
	for _, m := range list {
		out[m.name] = m
	}
	return out
}

// EveryDType lists the datatypes of model every_dtype, in its tensor
// order; its tensors are named in_/out_ and the datatype lower-cased
// (in_fp32 → out_fp32).
var EveryDType = []tensor.DataType{tensor.FP32, tensor.FP64, tensor.FP16, tensor.Int8, tensor.Int16, tensor.Int32,
	tensor.Int64, tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64, tensor.Bool, tensor.Bytes}

func everyDTypeSpecs(prefix string) []tensor.Spec {
	out := make([]tensor.Spec, len(EveryDType))
	for i, dt := range EveryDType {
		out[i] = spec(prefix+strings.ToLower(dt.String()), dt, -1)
	}
	return out
}

// Models returns the names of the sample models every kind serves, sorted.
func Models() []string {
	var names []string
	for name := range sampleModels() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Element helpers. Inputs reaching run were validated, so their Data has
// exactly NumElements × Size bytes.

func numElems(t *tensor.Tensor) int {
	if t.DataType == tensor.Bytes {
		return len(t.Strings)
	}
	return len(t.Data) / t.DataType.Size()
}

func f32At(d []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:])) }

func putF32(d []byte, i int, v float32) { binary.LittleEndian.PutUint32(d[4*i:], math.Float32bits(v)) }

func newTensor(name string, dt tensor.DataType, shape []int64, n int) tensor.Tensor {
	t := tensor.Tensor{Name: name, DataType: dt, Shape: slices.Clone(shape)}
	if dt == tensor.Bytes {
		t.Strings = make([][]byte, n)
	} else {
		t.Data = make([]byte, n*dt.Size())
	}
	return t
}

func runHalfPlusTwo(in []tensor.Tensor) []tensor.Tensor {
	x := &in[0]
	n := numElems(x)
	y := newTensor("y", tensor.FP32, x.Shape, n)
	for i := range n {
		putF32(y.Data, i, 0.5*f32At(x.Data, i)+2)
	}
	return []tensor.Tensor{y}
}

func runSimple(in []tensor.Tensor) []tensor.Tensor {
	a, b := &in[0], &in[1]
	n := numElems(a)
	sum := newTensor("OUTPUT0", tensor.Int32, a.Shape, n)
	diff := newTensor("OUTPUT1", tensor.Int32, a.Shape, n)
	for i := range n {
		x := int32(binary.LittleEndian.Uint32(a.Data[4*i:]))
		y := int32(binary.LittleEndian.Uint32(b.Data[4*i:]))
		binary.LittleEndian.PutUint32(sum.Data[4*i:], uint32(x+y))
		binary.LittleEndian.PutUint32(diff.Data[4*i:], uint32(x-y))
	}
	return []tensor.Tensor{sum, diff}
}

func runBytesEcho(in []tensor.Tensor) []tensor.Tensor {
	x := &in[0]
	echo := newTensor("echo", tensor.Bytes, x.Shape, len(x.Strings))
	rev := newTensor("echo_bytes", tensor.Bytes, x.Shape, len(x.Strings))
	for i, s := range x.Strings {
		echo.Strings[i] = slices.Clone(s)
		r := slices.Clone(s)
		slices.Reverse(r)
		rev.Strings[i] = r
	}
	return []tensor.Tensor{echo, rev}
}

func runHalfTimesTwo(in []tensor.Tensor) []tensor.Tensor {
	x := &in[0]
	n := numElems(x)
	y := newTensor("y", tensor.FP16, x.Shape, n)
	for i := range n {
		h := float16.Frombits(binary.LittleEndian.Uint16(x.Data[2*i:]))
		binary.LittleEndian.PutUint16(y.Data[2*i:], float16.Fromfloat32(2*h.Float32()).Bits())
	}
	return []tensor.Tensor{y}
}

func runMultiOut(in []tensor.Tensor) []tensor.Tensor {
	x := &in[0]
	rows := int(x.Shape[0])
	shape := []int64{x.Shape[0]}
	sum := newTensor("sum", tensor.FP32, shape, rows)
	label := newTensor("label_bytes", tensor.Bytes, shape, rows)
	argmax := newTensor("argmax", tensor.Int64, shape, rows)
	for r := range rows {
		a, b := f32At(x.Data, 2*r), f32At(x.Data, 2*r+1)
		putF32(sum.Data, r, a+b)
		idx, name := int64(0), "first"
		if b > a {
			idx, name = 1, "second"
		}
		label.Strings[r] = []byte(name)
		binary.LittleEndian.PutUint64(argmax.Data[8*r:], uint64(idx))
	}
	return []tensor.Tensor{sum, label, argmax}
}

func runMixedTypes(in []tensor.Tensor) []tensor.Tensor {
	flag, count, value := &in[0], &in[1], &in[2]
	n := numElems(flag)
	notFlag := newTensor("not_flag", tensor.Bool, flag.Shape, n)
	plusOne := newTensor("count_plus_one", tensor.Int64, count.Shape, n)
	scaled := newTensor("scaled", tensor.FP64, value.Shape, n)
	for i := range n {
		if flag.Data[i] == 0 {
			notFlag.Data[i] = 1
		}
		c := int64(binary.LittleEndian.Uint64(count.Data[8*i:]))
		binary.LittleEndian.PutUint64(plusOne.Data[8*i:], uint64(c+1))
		v := math.Float64frombits(binary.LittleEndian.Uint64(value.Data[8*i:]))
		binary.LittleEndian.PutUint64(scaled.Data[8*i:], math.Float64bits(v*float64(c)))
	}
	return []tensor.Tensor{notFlag, plusOne, scaled}
}

func runFixed3(in []tensor.Tensor) []tensor.Tensor {
	x := &in[0]
	rev := newTensor("reversed", tensor.FP32, []int64{3}, 3)
	total := newTensor("total", tensor.FP32, []int64{1}, 1)
	var s float32
	for i := range 3 {
		v := f32At(x.Data, i)
		putF32(rev.Data, 2-i, v)
		s += v
	}
	putF32(total.Data, 0, s)
	return []tensor.Tensor{rev, total}
}

func runImageClassifier(in []tensor.Tensor) []tensor.Tensor {
	x := &in[0]
	batch := int(x.Shape[0])
	per := numElems(x) / max(batch, 1)
	scores := newTensor("scores", tensor.FP32, []int64{int64(batch), 1000}, batch*1000)
	for b := range batch {
		var sum float64
		for i := range per {
			sum += float64(f32At(x.Data, b*per+i))
		}
		mean := float32(sum / float64(per))
		for k := range 1000 {
			putF32(scores.Data, b*1000+k, mean+float32(k)/1000)
		}
	}
	return []tensor.Tensor{scores}
}

// runIdentity copies each input to the output at the same position; the
// caller renames it after the model's output spec.
func runIdentity(in []tensor.Tensor) []tensor.Tensor {
	out := make([]tensor.Tensor, len(in))
	for i := range in {
		out[i] = tensor.Tensor{
			DataType: in[i].DataType,
			Shape:    slices.Clone(in[i].Shape),
			Data:     slices.Clone(in[i].Data),
			Strings:  slices.Clone(in[i].Strings),
		}
	}
	return out
}

func runFP16Output(in []tensor.Tensor) []tensor.Tensor {
	x := &in[0]
	n := numElems(x)
	flat := []int64{int64(n)}
	h := newTensor("fp16_output", tensor.FP16, flat, n)
	f := newTensor("fp32_output", tensor.FP32, flat, n)
	for i := range n {
		v := f32At(x.Data, i)
		binary.LittleEndian.PutUint16(h.Data[2*i:], float16.Fromfloat32(v).Bits())
		putF32(f.Data, i, v)
	}
	return []tensor.Tensor{h, f}
}

func runFP16Input(in []tensor.Tensor) []tensor.Tensor {
	h, s := &in[0], &in[1]
	n := numElems(h)
	strs := newTensor("str_output", tensor.Bytes, []int64{int64(len(s.Strings))}, len(s.Strings))
	for i, v := range s.Strings {
		strs.Strings[i] = slices.Clone(v)
	}
	f := newTensor("fp32_output", tensor.FP32, []int64{int64(n)}, n)
	for i := range n {
		putF32(f.Data, i, float16.Frombits(binary.LittleEndian.Uint16(h.Data[2*i:])).Float32())
	}
	return []tensor.Tensor{strs, f}
}
