package translate

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
)

// BenchmarkResponseImage measures the response pipeline on an image
// model's answer: a v2 binary response (JSON header + one FP32
// [1,224,224,3] block of values in [0,1)) turned into TF Serving's row
// JSON. The baseline is what a naive Go translator would spend on the
// JSON alone: encoding/json.Marshal of the same values as a
// [][][][]float32 (building that slice from the block is not timed).
// MB/s is output bytes per second; out_B is the output size, to compare
// B/op with.
func BenchmarkResponseImage(b *testing.B) {
	const h, w, c = 224, 224, 3
	r := rand.New(rand.NewPCG(7, 11))
	vals := make([]float32, h*w*c)
	for i := range vals {
		vals[i] = r.Float32()
	}
	body, headerLen := respBody([]respOut{{"probabilities", "FP32", []int64{1, h, w, c}, respFP32(vals...)}})
	ex := Exchange{
		Format: tfrequest.Row,
		Signature: &tensor.Signature{Model: "image", Batched: true,
			Outputs: []tensor.Spec{{Name: "probabilities", DataType: tensor.FP32, Shape: []int64{-1, h, w, c}}}},
	}

	b.Run("baseline", func(b *testing.B) {
		block := body[headerLen:]
		nested := make([][][][]float32, 1)
		nested[0] = make([][][]float32, h)
		for i := range nested[0] {
			nested[0][i] = make([][]float32, w)
			for j := range nested[0][i] {
				px := make([]float32, c)
				for k := range px {
					px[k] = math.Float32frombits(binary.LittleEndian.Uint32(block[4*((i*w+j)*c+k):]))
				}
				nested[0][i][j] = px
			}
		}
		out, err := json.Marshal(nested)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(out)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := json.Marshal(nested); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(out)), "out_B")
	})

	b.Run("tfsbridge", func(b *testing.B) {
		out, err := TranslateResponse(body, headerLen, ex, tensor.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(out)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := TranslateResponse(body, headerLen, ex, tensor.Limits{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(out)), "out_B")
	})
}
