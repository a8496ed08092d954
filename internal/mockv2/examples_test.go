package mockv2

import (
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// The tests build tf.Examples with protowire by hand, in both the packed
// and the unpacked list encodings, so the reader is checked against the
// wire format itself rather than against tfsbridge's writer.

func msg(num protowire.Number, body []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, body)
}

func example(entries ...[]byte) []byte {
	var feats []byte
	for _, e := range entries {
		feats = append(feats, msg(1, e)...)
	}
	return msg(1, feats)
}

func entry(name string, feature []byte) []byte {
	return append(msg(1, []byte(name)), msg(2, feature)...)
}

func floatsPacked(vs ...float32) []byte {
	var p []byte
	for _, v := range vs {
		p = protowire.AppendFixed32(p, math.Float32bits(v))
	}
	return msg(2, msg(1, p))
}

func floatsUnpacked(vs ...float32) []byte {
	var l []byte
	for _, v := range vs {
		l = protowire.AppendTag(l, 1, protowire.Fixed32Type)
		l = protowire.AppendFixed32(l, math.Float32bits(v))
	}
	return msg(2, l)
}

func int64s(packed bool, vs ...int64) []byte {
	var l []byte
	if packed {
		var p []byte
		for _, v := range vs {
			p = protowire.AppendVarint(p, uint64(v))
		}
		return msg(3, msg(1, p))
	}
	for _, v := range vs {
		l = protowire.AppendTag(l, 1, protowire.VarintType)
		l = protowire.AppendVarint(l, uint64(v))
	}
	return msg(3, l)
}

func strs(vs ...string) []byte {
	var l []byte
	for _, v := range vs {
		l = append(l, msg(1, []byte(v))...)
	}
	return msg(1, l)
}

func examplesTensor(ex ...[]byte) []tensor.Tensor {
	return []tensor.Tensor{{Name: "inputs", DataType: tensor.Bytes, Shape: []int64{int64(len(ex))}, Strings: ex}}
}

func TestExampleModels(t *testing.T) {
	ctx := example(entry("w", floatsPacked(3)), entry("x", int64s(true, 100)))
	tests := []struct {
		name    string
		run     func([]tensor.Tensor) ([]tensor.Tensor, error)
		in      [][]byte
		classes []string
		scores  []float32
		shape   []int64
		err     string
	}{
		{name: "regress default weights", run: runLinearRegressor,
			in: [][]byte{example(entry("x", floatsPacked(1))), example(entry("x", int64s(false, -4)))}, scores: []float32{2.5, 0}, shape: []int64{2}},
		{name: "regress: context merged, the example's x wins", run: runLinearRegressor,
			in:     [][]byte{append(slices.Clone(ctx), example(entry("x", floatsUnpacked(2)))...), ctx},
			scores: []float32{8, 302}, shape: []int64{2}},
		{name: "regress without x", run: runLinearRegressor, in: [][]byte{example(entry("y", floatsPacked(1)))},
			err: "example 0 has no numeric feature 'x'"},
		{name: "regress malformed", run: runLinearRegressor, in: [][]byte{{0x0a, 0x05, 0x01}}, err: "example 0: malformed tf.Example"},
		{name: "classify default vocabulary", run: runLinearClassifier, in: [][]byte{example(entry("x", int64s(true, 0)))},
			classes: []string{"negative", "positive"}, scores: []float32{0.5, 0.5}, shape: []int64{1, 2}},
		{name: "classify echo", run: runLinearClassifier,
			in:      [][]byte{example(entry("labels", strs("car", "bike")), entry("scores", floatsPacked(0.2, 0.7)))},
			classes: []string{"car", "bike"}, scores: []float32{0.2, 0.7}, shape: []int64{1, 2}},
		{name: "classify label counts differ", run: runLinearClassifier,
			in:  [][]byte{example(entry("x", int64s(true, 1))), example(entry("x", int64s(true, 1)), entry("labels", strs("a", "b", "c")))},
			err: "example 1 has 3 labels, example 0 has 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.run(examplesTensor(tt.in...))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sc := out[len(out)-1]
			if !slices.Equal(sc.Shape, tt.shape) {
				t.Errorf("shape %v, want %v", sc.Shape, tt.shape)
			}
			for i, want := range tt.scores {
				if got := f32At(sc.Data, i); got != want {
					t.Errorf("value %d = %v, want %v", i, got, want)
				}
			}
			for i, want := range tt.classes {
				if got := string(out[0].Strings[i]); got != want {
					t.Errorf("class %d = %q, want %q", i, got, want)
				}
			}
		})
	}
}
