package tfcompare

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/x448/float16"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// viaText is Compare of the TF texts tfresponse writes for a and b; ok is
// false when the writer refuses either.
func viaText(t testing.TB, c *Comparer, a, b Predict) (*Result, bool) {
	t.Helper()
	ta, err := tfresponse.Predict(nil, a.Outputs, a.Format)
	if err != nil {
		return nil, false
	}
	tb, err := tfresponse.Predict(nil, b.Outputs, b.Format)
	if err != nil {
		return nil, false
	}
	return c.Compare(Answer{Status: 200, Body: ta}, Answer{Status: 200, Body: tb}), true
}

// sameResult fails t when ComparePredict's result differs from Compare's
// of the texts (an empty shape and a nil one are the same).
func sameResult(t testing.TB, a, b Predict, got, want *Result) {
	t.Helper()
	norm := func(r *Result) Result {
		n := *r
		n.Outputs = append([]Output(nil), r.Outputs...)
		for i := range n.Outputs {
			o := &n.Outputs[i]
			if len(o.ShapeA) == 0 {
				o.ShapeA = nil
			}
			if len(o.ShapeB) == 0 {
				o.ShapeB = nil
			}
		}
		return n
	}
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		ta, _ := tfresponse.Predict(nil, a.Outputs, a.Format)
		tb, _ := tfresponse.Predict(nil, b.Outputs, b.Format)
		t.Fatalf("ComparePredict differs from Compare of the texts\nA: %s\nB: %s\ngot  %+v\nwant %+v", ta, tb, g, w)
	}
}

// fp32 is an FP32 tensor of shape holding vals.
func fp32(name string, shape []int64, vals ...float32) tensor.Tensor {
	d := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(d[4*i:], math.Float32bits(v))
	}
	return tensor.Tensor{Name: name, DataType: tensor.FP32, Shape: shape, Data: d}
}

func TestComparePredict(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	i64 := func(name string, vals ...int64) tensor.Tensor {
		d := make([]byte, 8*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint64(d[8*i:], uint64(v))
		}
		return tensor.Tensor{Name: name, DataType: tensor.Int64, Shape: []int64{int64(len(vals))}, Data: d}
	}
	u64 := func(name string, vals ...uint64) tensor.Tensor {
		d := make([]byte, 8*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint64(d[8*i:], v)
		}
		return tensor.Tensor{Name: name, DataType: tensor.Uint64, Shape: []int64{int64(len(vals))}, Data: d}
	}
	bytesOut := tensor.Tensor{Name: "s", DataType: tensor.Bytes, Shape: []int64{1}, Strings: [][]byte{[]byte("x")}}
	tol := Tolerance{Abs: 1e-5, Rel: 1e-4}
	for _, tc := range []struct {
		name    string
		a, b    []tensor.Tensor
		format  tfjson.Format
		ok      bool
		verdict Verdict
	}{
		{"drift within tolerance", []tensor.Tensor{fp32("y", []int64{3}, 2.5, 3, 4.5)}, []tensor.Tensor{fp32("y", []int64{3}, 2.500001, 3.000001, 4.500001)}, tfjson.Row, true, Within},
		{"identical", []tensor.Tensor{fp32("y", []int64{3}, 2.5, 3, 4.5)}, []tensor.Tensor{fp32("y", []int64{3}, 2.5, 3, 4.5)}, tfjson.Columnar, true, Identical},
		{"over tolerance", []tensor.Tensor{fp32("y", []int64{2, 1}, 1, 2)}, []tensor.Tensor{fp32("y", []int64{2, 1}, 1, 2.25)}, tfjson.Row, true, Mismatch},
		{"NaN and Inf", []tensor.Tensor{fp32("y", []int64{4}, nan, inf, -inf, 0)}, []tensor.Tensor{fp32("y", []int64{4}, nan, inf, inf, float32(math.Copysign(0, -1)))}, tfjson.Columnar, true, Mismatch},
		{"two outputs, sorted by name", []tensor.Tensor{fp32("z", []int64{2}, 1, 2), i64("a", 7, 8)}, []tensor.Tensor{fp32("z", []int64{2}, 1, 2.00001), i64("a", 7, 9)}, tfjson.Row, true, Mismatch},
		{"two outputs columnar", []tensor.Tensor{fp32("z", []int64{2}, 1, 2), i64("a", 7, 8)}, []tensor.Tensor{fp32("z", []int64{2}, 1, 2.00001), i64("a", 7, 8)}, tfjson.Columnar, true, Within},
		{"uint64 beyond int64", []tensor.Tensor{u64("u", 1<<63, 5)}, []tensor.Tensor{u64("u", 1<<63+1, 5)}, tfjson.Columnar, true, Identical},
		{"uint64 crossing int64's range", []tensor.Tensor{u64("u", 1<<63-1)}, []tensor.Tensor{u64("u", 1<<63)}, tfjson.Columnar, true, Mismatch},
		{"a rank-0 output in columnar format", []tensor.Tensor{fp32("y", nil, 1)}, []tensor.Tensor{fp32("y", nil, 1.5)}, tfjson.Columnar, true, Mismatch},
		{"shapes differ", []tensor.Tensor{fp32("y", []int64{2}, 1, 2)}, []tensor.Tensor{fp32("y", []int64{2, 1}, 1, 2)}, tfjson.Row, false, 0},
		{"names differ", []tensor.Tensor{fp32("y", []int64{1}, 1)}, []tensor.Tensor{fp32("x", []int64{1}, 1)}, tfjson.Columnar, false, 0},
		{"bytes", []tensor.Tensor{bytesOut}, []tensor.Tensor{bytesOut}, tfjson.Columnar, false, 0},
		{"no elements", []tensor.Tensor{fp32("y", []int64{0})}, []tensor.Tensor{fp32("y", []int64{0})}, tfjson.Columnar, false, 0},
		{"a scalar in row format", []tensor.Tensor{fp32("y", nil, 1)}, []tensor.Tensor{fp32("y", nil, 1)}, tfjson.Row, false, 0},
		{"no outputs", nil, nil, tfjson.Row, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := Predict{Outputs: tc.a, Format: tc.format}, Predict{Outputs: tc.b, Format: tc.format}
			got, ok := New(tol).ComparePredict(a, b)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if got.Verdict != tc.verdict {
				t.Errorf("verdict = %v, want %v", got.Verdict, tc.verdict)
			}
			want, ok := viaText(t, New(tol), a, b)
			if !ok {
				t.Fatal("the writer refuses a pair ComparePredict accepts")
			}
			sameResult(t, a, b, got, want)
		})
	}
}

// TestComparePredictIsCompare: on random pairs of outputs (all datatypes
// but BYTES, drifting, equal, non-finite and extreme values, both
// formats), ComparePredict gives Compare's Result of the texts whenever
// it accepts the pair, and accepts every pair of one form.
func TestComparePredictIsCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	fast, slow := New(Tolerance{Abs: 1e-5, Rel: 1e-4}), New(Tolerance{Abs: 1e-5, Rel: 1e-4})
	accepted := 0
	for range 3000 {
		a, b := randomPair(rng)
		got, ok := fast.ComparePredict(a, b)
		if !ok {
			continue
		}
		accepted++
		want, ok := viaText(t, slow, a, b)
		if !ok {
			t.Fatalf("the writer refuses a pair ComparePredict accepts: %+v", a)
		}
		sameResult(t, a, b, got, want)
	}
	if accepted < 1500 {
		t.Errorf("only %d of 3000 pairs compared on their tensors", accepted)
	}
}

// FuzzComparePredict is TestComparePredictIsCompare from a fuzzed seed.
func FuzzComparePredict(f *testing.F) {
	for i := range uint64(8) {
		f.Add(i, i*7919)
	}
	fast, slow := New(DefaultTolerance), New(DefaultTolerance)
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		a, b := randomPair(rand.New(rand.NewPCG(s1, s2)))
		got, ok := fast.ComparePredict(a, b)
		if !ok {
			return
		}
		want, ok := viaText(t, slow, a, b)
		if !ok {
			t.Fatalf("the writer refuses a pair ComparePredict accepts: %+v", a)
		}
		sameResult(t, a, b, got, want)
	})
}

// pairTypes are the datatypes randomPair draws (BYTES among them, which
// ComparePredict leaves to the texts).
var pairTypes = []tensor.DataType{tensor.FP32, tensor.FP32, tensor.FP32, tensor.FP64, tensor.FP16, tensor.BF16,
	tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64, tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64,
	tensor.Bool, tensor.Bytes}

// randomPair is a primary's outputs and a shadow's: mostly the same
// names, datatypes and shapes with values equal, drifting a little or a
// lot, or special; sometimes a shape or name apart.
func randomPair(rng *rand.Rand) (Predict, Predict) {
	format := tfjson.Row
	if rng.IntN(2) == 0 {
		format = tfjson.Columnar
	}
	n := 1 + rng.IntN(3)
	batch := int64(1 + rng.IntN(3))
	var a, b []tensor.Tensor
	names := []string{"y", "scores", "a_bytes", "z", "predictions"}
	for i := range n {
		dt := pairTypes[rng.IntN(len(pairTypes))]
		rank := rng.IntN(4)
		if format == tfjson.Row {
			rank = max(rank, 1)
		}
		shape := make([]int64, rank)
		for d := range shape {
			shape[d] = int64(1 + rng.IntN(3))
			if rng.IntN(40) == 0 {
				shape[d] = 0
			}
		}
		if format == tfjson.Row {
			shape[0] = batch
		}
		name := names[(i+rng.IntN(2))%len(names)]
		ta, tb := randomTensor(rng, name, dt, shape)
		a, b = append(a, ta), append(b, tb)
	}
	if rng.IntN(30) == 0 && len(b[0].Shape) > 0 {
		b[0].Shape = append([]int64{1}, b[0].Shape...)
	}
	return Predict{Outputs: a, Format: format}, Predict{Outputs: b, Format: format}
}

// randomTensor is a pair of tensors of one datatype and shape, the
// second's values related to the first's.
func randomTensor(rng *rand.Rand, name string, dt tensor.DataType, shape []int64) (tensor.Tensor, tensor.Tensor) {
	n, _ := tensor.NumElements(shape)
	ta := tensor.Tensor{Name: name, DataType: dt, Shape: shape}
	tb := ta
	if dt == tensor.Bytes {
		for range n {
			ta.Strings = append(ta.Strings, []byte("s"))
		}
		tb.Strings = ta.Strings
		return ta, tb
	}
	size := dt.Size()
	ta.Data, tb.Data = make([]byte, int(n)*size), make([]byte, int(n)*size)
	for i := range int(n) {
		x := randomValue(rng)
		y := x
		switch rng.IntN(5) {
		case 0: // equal
		case 1:
			y = x * (1 + (rng.Float64()-0.5)*1e-4)
		case 2:
			y = x + (rng.Float64()-0.5)*1e-6
		case 3:
			y = randomValue(rng)
		default:
			y = x * (1 + (rng.Float64()-0.5)*1e-7)
		}
		put(ta.Data[i*size:], dt, x)
		put(tb.Data[i*size:], dt, y)
	}
	return ta, tb
}

// randomValue is a number of any scale, or a special one.
func randomValue(rng *rand.Rand) float64 {
	switch rng.IntN(12) {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1 - 2*rng.IntN(2))
	case 2:
		return 0
	case 3:
		return math.Ldexp(rng.Float64(), -rng.IntN(160)) // down to subnormals
	case 4:
		return float64(rng.Int64()) * float64(1-2*rng.IntN(2))
	case 5:
		return float64(rng.IntN(300) - 100)
	}
	return (rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(12)-4))
}

// put stores x as one element of dt (converted as a cast would, integers
// wrapping).
func put(d []byte, dt tensor.DataType, x float64) {
	i := int64(0)
	if !math.IsNaN(x) && !math.IsInf(x, 0) && math.Abs(x) < 9e18 {
		i = int64(x)
	}
	switch dt {
	case tensor.FP32:
		binary.LittleEndian.PutUint32(d, math.Float32bits(float32(x)))
	case tensor.FP64:
		binary.LittleEndian.PutUint64(d, math.Float64bits(x))
	case tensor.FP16:
		binary.LittleEndian.PutUint16(d, float16.Fromfloat32(float32(x)).Bits())
	case tensor.BF16:
		binary.LittleEndian.PutUint16(d, uint16(math.Float32bits(float32(x))>>16))
	case tensor.Int8, tensor.Uint8:
		d[0] = byte(i)
	case tensor.Bool:
		d[0] = byte(i & 1)
	case tensor.Int16, tensor.Uint16:
		binary.LittleEndian.PutUint16(d, uint16(i))
	case tensor.Int32, tensor.Uint32:
		binary.LittleEndian.PutUint32(d, uint32(i))
	case tensor.Int64:
		binary.LittleEndian.PutUint64(d, uint64(i))
	case tensor.Uint64:
		binary.LittleEndian.PutUint64(d, uint64(i)^uint64(x2bit(x))<<63)
	}
}

// x2bit draws the top bit of a UINT64 from x's sign, so that values
// beyond int64's range occur.
func x2bit(x float64) int {
	if x < 0 {
		return 1
	}
	return 0
}
