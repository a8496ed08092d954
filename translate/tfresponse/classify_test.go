package tfresponse

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

func f32Tensor(name string, shape []int64, v ...float32) *tensor.Tensor {
	t := &tensor.Tensor{Name: name, DataType: tensor.FP32, Shape: shape}
	for _, x := range v {
		t.Data = binary.LittleEndian.AppendUint32(t.Data, math.Float32bits(x))
	}
	return t
}

func bytesTensor(name string, shape []int64, v ...string) *tensor.Tensor {
	t := &tensor.Tensor{Name: name, DataType: tensor.Bytes, Shape: shape}
	for _, s := range v {
		t.Strings = append(t.Strings, []byte(s))
	}
	return t
}

// TestClassifyRegress covers what the vectors do not: a missing classes
// or scores output, escaping, [N,1] regress outputs, and every TF error
// text in TF's order of checks.
func TestClassifyRegress(t *testing.T) {
	nk := []int64{2, 2}
	classes := bytesTensor("classes", nk, "a", "b\"\n", "c", "d")
	scores := f32Tensor("scores", nk, 0.25, 1, float32(math.NaN()), 1e6)
	cases := []struct {
		name      string
		run       func() ([]byte, error)
		want      string
		wantError string
	}{
		{name: "classes and scores", run: func() ([]byte, error) { return Classify(nil, classes, scores, 2) },
			want: "{\n    \"results\": [[[\"a\", 0.25], [\"b\\\"\\n\", 1.0]], [[\"c\", NaN], [\"d\", 1e+06]]\n    ]\n}"},
		{name: "no scores output: 0.0", run: func() ([]byte, error) { return Classify(nil, classes, nil, 2) },
			want: "{\n    \"results\": [[[\"a\", 0.0], [\"b\\\"\\n\", 0.0]], [[\"c\", 0.0], [\"d\", 0.0]]\n    ]\n}"},
		{name: "no classes output: empty labels", run: func() ([]byte, error) { return Classify(nil, nil, scores, 2) },
			want: "{\n    \"results\": [[[\"\", 0.25], [\"\", 1.0]], [[\"\", NaN], [\"\", 1e+06]]\n    ]\n}"},
		{name: "zero classes", run: func() ([]byte, error) { return Classify(nil, nil, f32Tensor("scores", []int64{2, 0}), 2) },
			want: "{\n    \"results\": [[], []\n    ]\n}"},
		{name: "classes rank", run: func() ([]byte, error) {
			return Classify(nil, bytesTensor("classes", []int64{4}, "a", "b", "c", "d"), scores, 2)
		},
			wantError: "Expected Tensor shape: [batch_size num_classes] but got [4]"},
		{name: "classes dtype", run: func() ([]byte, error) { return Classify(nil, f32Tensor("classes", nk, 1, 2, 3, 4), scores, 2) },
			wantError: "Expected classes Tensor of DT_STRING. Got: DT_FLOAT"},
		{name: "classes batch", run: func() ([]byte, error) { return Classify(nil, classes, scores, 3) },
			wantError: "Expected classes output batch size of 3. Got: 2"},
		{name: "scores rank", run: func() ([]byte, error) {
			return Classify(nil, classes, f32Tensor("scores", []int64{2, 2, 1}, 1, 2, 3, 4), 2)
		},
			wantError: "Expected Tensor shape: [batch_size num_classes] but got [2,2,1]"},
		{name: "scores dtype", run: func() ([]byte, error) {
			return Classify(nil, nil, &tensor.Tensor{Name: "scores", DataType: tensor.FP64, Shape: nk, Data: make([]byte, 32)}, 2)
		}, wantError: "Expected scores Tensor of DT_FLOAT. Got: DT_DOUBLE"},
		{name: "scores batch", run: func() ([]byte, error) { return Classify(nil, nil, f32Tensor("scores", []int64{1, 1}, 1), 2) },
			wantError: "Expected scores output batch size of 2. Got: 1"},
		{name: "class counts differ", run: func() ([]byte, error) { return Classify(nil, classes, f32Tensor("scores", []int64{2, 1}, 1, 2), 2) },
			wantError: "Tensors class and score should match in dim_size(1). Got 2 vs. 1"},
		{name: "regress [N]", run: func() ([]byte, error) { return Regress(nil, f32Tensor("outputs", []int64{3}, 0.5, -2, 1.0/3), 3) },
			want: "{\n    \"results\": [0.5, -2.0, 0.333333343]\n}"},
		{name: "regress [N,1]", run: func() ([]byte, error) { return Regress(nil, f32Tensor("outputs", []int64{2, 1}, 7, 1e-5), 2) },
			want: "{\n    \"results\": [7.0, 1e-05]\n}"},
		{name: "regress shape", run: func() ([]byte, error) { return Regress(nil, f32Tensor("outputs", []int64{1, 2}, 1, 2), 1) },
			wantError: "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got [1,2]"},
		{name: "regress scalar", run: func() ([]byte, error) { return Regress(nil, f32Tensor("outputs", nil, 1), 1) },
			wantError: "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got []"},
		{name: "regress batch", run: func() ([]byte, error) { return Regress(nil, f32Tensor("outputs", []int64{2}, 1, 2), 3) },
			wantError: "Input batch size did not match output batch size: 3 vs. 2"},
		{name: "regress dtype", run: func() ([]byte, error) {
			return Regress(nil, &tensor.Tensor{Name: "outputs", DataType: tensor.Int64, Shape: []int64{1}, Data: make([]byte, 8)}, 1)
		}, wantError: "Expected output Tensor of DT_FLOAT.  Got: DT_INT64"},
		{name: "regress empty", run: func() ([]byte, error) { return Regress(nil, f32Tensor("outputs", []int64{0}), 0) },
			wantError: "Cannot convert empty RegressionResults to JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.run()
			if c.wantError != "" {
				e := apierr.As(err)
				if err == nil || e.Msg != c.wantError || e.HTTPStatus() != 400 {
					t.Fatalf("error %v, want 400 %q", err, c.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

// Classify appends the classify body NewClassify writes for classes and
// scores (either may be nil: the signature lacks it) to dst, or returns
// dst unchanged with its error.
func Classify(dst []byte, classes, scores *tensor.Tensor, numExamples int) ([]byte, error) {
	var outputs []tensor.Tensor
	ci, si := -1, -1
	if classes != nil {
		ci, outputs = 0, append(outputs, *classes)
	}
	if scores != nil {
		si, outputs = len(outputs), append(outputs, *scores)
	}
	return appendBody(dst)(NewClassify(outputs, ci, si, numExamples))
}

// Regress appends the regress body NewRegress writes for outputs to dst.
func Regress(dst []byte, outputs *tensor.Tensor, numExamples int) ([]byte, error) {
	return appendBody(dst)(NewRegress([]tensor.Tensor{*outputs}, 0, numExamples))
}

// appendBody returns a function appending a checked body to dst, or
// passing on its constructor's error.
func appendBody(dst []byte) func(*Body, error) ([]byte, error) {
	return func(b *Body, err error) ([]byte, error) {
		if err != nil {
			return dst, err
		}
		defer b.Release()
		return b.AppendTo(dst), nil
	}
}
