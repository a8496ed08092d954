package oip

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// benchAllocRatio runs op b.N times and reports the bytes allocated per op
// divided by the output size: the hot-path bar is 1.5.
func benchAllocRatio(b *testing.B, outBytes int, op func()) {
	b.ReportAllocs()
	b.SetBytes(int64(outBytes))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		op()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(outBytes), "alloc/out")
}

// imageInputs is a typical vision request: one [1,224,224,3] FP32 image.
func imageInputs() []tensor.Tensor {
	vs := make([]float32, 224*224*3)
	for i := range vs {
		vs[i] = float32(i%255) / 255
	}
	return []tensor.Tensor{fp32T("input_1", []int64{1, 224, 224, 3}, vs...)}
}

func BenchmarkEncodeRequest(b *testing.B) {
	inputs := imageInputs()
	for _, kind := range []ServerKind{Triton, KServe, MLServer} {
		b.Run(kind.String(), func(b *testing.B) {
			opt := EncodeOptions{Kind: kind, ID: "bench"}
			body, _, _, err := EncodeRequest(nil, inputs, opt)
			if err != nil {
				b.Fatal(err)
			}
			benchAllocRatio(b, len(body), func() { _, _, _, _ = EncodeRequest(nil, inputs, opt) })
		})
	}
}

// BenchmarkDecodeResponse decodes a 1000-class FP32 output, binary (what
// tfsbridge asks Triton and KServe for) and JSON (MLServer).
func BenchmarkDecodeResponse(b *testing.B) {
	const n = 1000
	vs := make([]float32, n)
	for i := range vs {
		vs[i] = float32(i) / 7
	}
	out := fp32T("probabilities", []int64{1, n}, vs...)
	sig := &tensor.Signature{Outputs: []tensor.Spec{{Name: "probabilities", DataType: tensor.FP32, Shape: []int64{-1, n}}}}
	hdr := `{"model_name":"m","model_version":"1","outputs":[{"name":"probabilities","datatype":"FP32","shape":[1,1000],"parameters":{"binary_data_size":4000}}]}`
	binBody := append([]byte(hdr), out.Data...)
	jsonBody := []byte(`{"model_name":"m","outputs":[{"name":"probabilities","datatype":"FP32","shape":[1,1000],"data":[`)
	for i, v := range vs {
		if i > 0 {
			jsonBody = append(jsonBody, ',')
		}
		jsonBody = strconv.AppendFloat(jsonBody, float64(v), 'g', -1, 64)
	}
	jsonBody = append(jsonBody, "]}]}"...)
	cases := []struct {
		name string
		body []byte
		hl   int
	}{{"binary", binBody, len(hdr)}, {"json", jsonBody, -1}}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if _, err := DecodeResponse(c.body, c.hl, sig, tensor.Limits{}); err != nil {
				b.Fatal(err)
			}
			benchAllocRatio(b, len(out.Data), func() { _, _ = DecodeResponse(c.body, c.hl, sig, tensor.Limits{}) })
		})
	}
}
