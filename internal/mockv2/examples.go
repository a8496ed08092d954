package mockv2

import (
	"fmt"
	"math"
	"slices"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// The models behind TF Serving's :classify and :regress verbs. Each takes
// one BYTES input "inputs" of serialized tf.Examples (shape [N]) and reads
// their features with parseExample.

// defaultLabels is linear_classifier's vocabulary.
var defaultLabels = [][]byte{[]byte("negative"), []byte("positive")}

// parseExamples decodes every element of the examples input.
func parseExamples(in *tensor.Tensor) ([]map[string]*exFeature, error) {
	out := make([]map[string]*exFeature, len(in.Strings))
	for i, s := range in.Strings {
		f, err := parseExample(s)
		if err != nil {
			return nil, fmt.Errorf("example %d: %w", i, err)
		}
		out[i] = f
	}
	return out, nil
}

// runLinearClassifier scores each example: K classes named by its bytes
// feature "labels" (default negative/positive), scored by its float
// feature "scores" when it has one, else by a softmax over the logits
// (k − (K−1)/2)·x of its numeric feature "x" (for two classes: 1−σ(x),
// σ(x)). Every example must have the same K.
func runLinearClassifier(in []tensor.Tensor) ([]tensor.Tensor, error) {
	examples, err := parseExamples(&in[0])
	if err != nil {
		return nil, err
	}
	n, k := len(examples), -1
	var labels [][]byte
	var scores []float32
	for i, f := range examples {
		ls := defaultLabels
		if l := f["labels"]; l != nil && len(l.bytes) > 0 {
			ls = l.bytes
		}
		if k >= 0 && len(ls) != k {
			return nil, fmt.Errorf("example %d has %d labels, example 0 has %d", i, len(ls), k)
		}
		k = len(ls)
		labels = append(labels, ls...)
		if s := f["scores"]; s != nil && len(s.floats) > 0 {
			if len(s.floats) != k {
				return nil, fmt.Errorf("example %d has %d scores for %d labels", i, len(s.floats), k)
			}
			scores = append(scores, s.floats...)
			continue
		}
		x, err := exampleNumber(f, i, "x", nil)
		if err != nil {
			return nil, err
		}
		scores = append(scores, softmax(x, k)...)
	}
	shape := []int64{int64(n), int64(k)}
	classes := newTensor("classes", tensor.Bytes, shape, len(labels))
	for i, l := range labels {
		classes.Strings[i] = slices.Clone(l)
	}
	sc := newTensor("scores", tensor.FP32, shape, len(scores))
	for i, v := range scores {
		putF32(sc.Data, i, v)
	}
	return []tensor.Tensor{classes, sc}, nil
}

// softmax is the class probabilities of logits (c − (k−1)/2)·x.
func softmax(x float32, k int) []float32 {
	out := make([]float32, k)
	var sum float64
	exps := make([]float64, k)
	for c := range k {
		exps[c] = math.Exp((float64(c) - float64(k-1)/2) * float64(x))
		sum += exps[c]
	}
	for c := range k {
		out[c] = float32(exps[c] / sum)
	}
	return out
}

// runLinearRegressor computes w·x + b per example from its numeric
// features "x" (required), "w" (default 0.5) and "b" (default 2): by
// default TF Serving's half_plus_two, and a context can set w and b for
// every example of a request.
func runLinearRegressor(in []tensor.Tensor) ([]tensor.Tensor, error) {
	examples, err := parseExamples(&in[0])
	if err != nil {
		return nil, err
	}
	out := newTensor("outputs", tensor.FP32, []int64{int64(len(examples))}, len(examples))
	defW, defB := float32(0.5), float32(2)
	for i, f := range examples {
		x, err := exampleNumber(f, i, "x", nil)
		if err != nil {
			return nil, err
		}
		w, _ := exampleNumber(f, i, "w", &defW)
		b, _ := exampleNumber(f, i, "b", &defB)
		putF32(out.Data, i, float32(w*x)+b) // no fused multiply-add: the same float on every CPU
	}
	return []tensor.Tensor{out}, nil
}
