package translate

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// BenchmarkResponseImage measures the response pipeline on an image
// model's answer: a v2 binary response (JSON header + one FP32
// [1,224,224,3] block of values in [0,1)) turned into TF Serving's row
// JSON. The baseline is what a naive Go translator would spend on the
// JSON alone: encoding/json.Marshal of the same values as a
// [][][][]float32 (building that slice from the block is not timed).
// tfsbridge runs the production API, Pipeline.ResponseParts: the body
// handed over in place and released, as the adapters send it (Response
// would add a copy of the whole text).
// MB/s is output bytes per second; out_B is the output size, to compare
// B/op with. The alternating line runs both in turns and reports their
// ratio.
func BenchmarkResponseImage(b *testing.B) {
	body, headerLen, ex := imageResponse()
	// nested is built in the lines that marshal it: its 50 000 slices,
	// live for the whole function, would be scanned by every collection
	// the tfsbridge line's output triggers, a cost of the baseline's data
	// structure, not of the translation.
	b.Run("baseline", func(b *testing.B) {
		nested := imageNested(body[headerLen:])
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
		out, err := predict.Response(body, headerLen, ex, tensor.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(out)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			ans, err := predict.ResponseParts(body, headerLen, ex, tensor.Limits{})
			if err != nil {
				b.Fatal(err)
			}
			ans.Release()
		}
		b.ReportMetric(float64(len(out)), "out_B")
	})

	// The two in turns in one loop, so that a busy machine slows both
	// alike: x_json is tfsbridge's MB/s over the baseline's (each of its
	// own output, as the two lines above report them), x_time the
	// baseline's time over tfsbridge's.
	b.Run("alternating", func(b *testing.B) {
		nested := imageNested(body[headerLen:])
		out, err := predict.Response(body, headerLen, ex, tensor.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		base, err := json.Marshal(nested)
		if err != nil {
			b.Fatal(err)
		}
		var tBase, tOurs time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := json.Marshal(nested); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			ans, err := predict.ResponseParts(body, headerLen, ex, tensor.Limits{})
			if err != nil {
				b.Fatal(err)
			}
			ans.Release()
			tBase, tOurs = tBase+t1.Sub(t0), tOurs+time.Since(t1)
		}
		b.ReportMetric(float64(tBase)/float64(tOurs), "x_time")
		b.ReportMetric(float64(tBase)/float64(tOurs)*float64(len(out))/float64(len(base)), "x_json")
	})
}

// imageResponse is the v2 answer of an image model: a JSON header and one
// FP32 [1,224,224,3] block of values in [0,1), with its header length and
// exchange (row format).
func imageResponse() ([]byte, int, Exchange) {
	const h, w, c = 224, 224, 3
	r := rand.New(rand.NewPCG(7, 11))
	vals := make([]float32, h*w*c)
	for i := range vals {
		vals[i] = r.Float32()
	}
	body, headerLen := respBody([]respOut{{"probabilities", "FP32", []int64{1, h, w, c}, respFP32(vals...)}})
	ex := Exchange{
		Format: tfjson.Row,
		Signature: &tensor.Signature{Model: "image", Batched: true,
			Outputs: []tensor.Spec{{Name: "probabilities", DataType: tensor.FP32, Shape: []int64{-1, h, w, c}}}},
	}
	return body, headerLen, ex
}

// imageNested is the image block as the [][][][]float32 encoding/json
// marshals.
func imageNested(block []byte) [][][][]float32 {
	const h, w, c = 224, 224, 3
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
	return nested
}

// BenchmarkResponseImageChunked16K compares ResponseImage's whole-body
// translation with the same v2 body fed to a ResponseStream in 16 KiB
// chunks, each copied into one reused buffer first as a proxy receives
// them, the TF pieces handed to a function that drops them.
func BenchmarkResponseImageChunked16K(b *testing.B) {
	const size = 16 << 10
	body, headerLen, ex := imageResponse()
	out, err := predict.Response(body, headerLen, ex, tensor.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	whole := func(b *testing.B) {
		if _, err := predict.Response(body, headerLen, ex, tensor.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
	buf := make([]byte, size)
	chunked := func(b *testing.B) {
		s := predict.NewResponseStream(headerLen, ex, tensor.Limits{}, func([]byte) error { return nil })
		for p := 0; p < len(body); p += size {
			n := copy(buf, body[p:])
			if err := s.Write(buf[:n]); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Close(); err != nil || s.Emitted() != int64(len(out)) {
			b.Fatalf("chunked: %d bytes, %v", s.Emitted(), err)
		}
	}
	for _, run := range []struct {
		name string
		f    func(*testing.B)
	}{{"whole", whole}, {"chunked", chunked}} {
		b.Run(run.name, func(b *testing.B) {
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			for b.Loop() {
				run.f(b)
			}
		})
	}
	b.Run("alternating", func(b *testing.B) {
		var tWhole, tChunk time.Duration
		for b.Loop() {
			t0 := time.Now()
			whole(b)
			t1 := time.Now()
			chunked(b)
			tWhole, tChunk = tWhole+t1.Sub(t0), tChunk+time.Since(t1)
		}
		b.ReportMetric(float64(tChunk)/float64(tWhole), "chunked/whole")
	})
}
