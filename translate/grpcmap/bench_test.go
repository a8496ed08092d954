package grpcmap

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/tfsbridge/tfsbridge/translate/internal/grpcproto"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

// imageRequest is a resnet client's PredictRequest: one 1x224x224x3
// float32 image in tensor_content (tf.make_tensor_proto of a numpy array).
func imageRequest(b *testing.B) ([]byte, []byte, Resolver) {
	content := make([]byte, 224*224*3*4)
	for i := range content {
		content[i] = byte(i * 7)
	}
	msg := grpcproto.PredictRequest(&grpcproto.Spec{Name: "resnet"}, map[string]*dynamicpb.Message{
		"input_1": grpcproto.TensorProto(1, []int64{1, 224, 224, 3}, grpcproto.Content(content))})
	sig := &tensor.Signature{
		Inputs:  []tensor.Spec{{Name: "input_1", DataType: tensor.FP32, Shape: []int64{-1, 224, 224, 3}}},
		Outputs: []tensor.Spec{{Name: "probs", DataType: tensor.FP32, Shape: []int64{-1, 1000}}},
	}
	return msg, content, func(route.Route, string) (Target, error) { return Target{Signature: sig}, nil }
}

// BenchmarkPredictRequestImage translates the image request and, in the
// same loop, copies its 602 112 tensor bytes: the translation is that one
// copy plus the walk of a handful of fields. ns/op is one copy plus one
// translation; "copy-ns" and "translate-ns" are the medians of each alone
// (medians, so that a busy machine's bursts do not decide), "x-copy" the
// median of their per-iteration ratio (the goal: at most 2). "reused"
// writes into one buffer each time, as a transport with a pool would;
// "fresh" gives each message a new buffer and the copy a new one too.
func BenchmarkPredictRequestImage(b *testing.B) {
	msg, content, resolve := imageRequest(b)
	for _, fresh := range []bool{false, true} {
		name := "reused"
		if fresh {
			name = "fresh"
		}
		b.Run(name, func(b *testing.B) {
			dst := make([]byte, 0, len(msg)+4096)
			scratch := make([]byte, len(content))
			b.SetBytes(int64(len(content)))
			b.ReportAllocs()
			var copies, translations, ratios []float64
			for b.Loop() {
				t0 := time.Now()
				if fresh {
					scratch = make([]byte, len(content))
				}
				copy(scratch, content)
				t1 := time.Now()
				if fresh {
					dst = nil
				}
				out, _, err := PredictRequest(dst[:0], msg, resolve, Options{})
				t2 := time.Now()
				if err != nil || len(out) < len(content) {
					b.Fatal(err)
				}
				c, t := float64(t1.Sub(t0)), float64(t2.Sub(t1))
				copies, translations, ratios = append(copies, c), append(translations, t), append(ratios, t/c)
			}
			b.ReportMetric(median(copies), "copy-ns")
			b.ReportMetric(median(translations), "translate-ns")
			b.ReportMetric(median(ratios), "x-copy")
		})
	}
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// BenchmarkPredictResponse1000 writes a classifier's answer, 1000 float
// scores for a batch of 8, in TF's default typed fields.
func BenchmarkPredictResponse1000(b *testing.B) {
	data := make([]byte, 8*1000*4)
	probs := tensor.Tensor{Name: "probs", DataType: tensor.FP32, Shape: []int64{8, 1000}, Data: data}
	v2 := v2Answer("1", probs)
	ex := &Exchange{Method: Predict, Route: route.Route{Model: "resnet"}, SignatureName: DefaultSignature}
	for _, enc := range []tfgrpc.Encoding{tfgrpc.TypedFields, tfgrpc.TensorContent} {
		name := map[tfgrpc.Encoding]string{tfgrpc.TypedFields: "typed", tfgrpc.TensorContent: "content"}[enc]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			dst := make([]byte, 0, 2*len(v2))
			for b.Loop() {
				if _, err := PredictResponse(dst[:0], v2, ex, Options{Encoding: enc}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
