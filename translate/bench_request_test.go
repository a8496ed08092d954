package translate

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// imageDoc returns a 1×224×224×3 row-format request as a client sends it:
// {"instances": [[[[r, g, b], ...], ...]]} with values in [0, 1) written
// with digits significant digits, or (digits < 0) as Python's repr of a
// float64 does (numpy tolist() + json.dumps: shortest round-trip, mostly
// 16–17 digits). Python's separators ", " are used.
func imageDoc(digits int) []byte { return imageText('g', digits) }

// imageText is imageDoc with every value written by strconv.AppendFloat
// in the given format at precision prec.
func imageText(format byte, prec int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 0, 224*224*3*20+64)
	b = append(b, `{"instances": [[`...)
	for y := 0; y < 224; y++ {
		if y > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '[')
		for x := 0; x < 224; x++ {
			if x > 0 {
				b = append(b, ", "...)
			}
			b = append(b, '[')
			for c := 0; c < 3; c++ {
				if c > 0 {
					b = append(b, ", "...)
				}
				b = strconv.AppendFloat(b, r.Float64(), format, prec, 64)
			}
			b = append(b, ']')
		}
		b = append(b, ']')
	}
	return append(b, "]]}"...)
}

var imageSig = &tensor.Signature{
	Model:   "resnet",
	Inputs:  []tensor.Spec{{Name: "input_1", DataType: tensor.FP32, Shape: []int64{-1, 224, 224, 3}}},
	Outputs: []tensor.Spec{{Name: "probs", DataType: tensor.FP32, Shape: []int64{-1, 1000}}},
	Batched: true,
}

func imageResolve(string) (*tensor.Signature, error) { return imageSig, nil }

// baselineTranslate is the fair naive translator the bars are measured
// against: encoding/json into interface{}, then flattening into []float32.
func baselineTranslate(body []byte) ([]float32, error) {
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	out := make([]float32, 0, 1024)
	var flatten func(v any)
	flatten = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				flatten(e)
			}
		case float64:
			out = append(out, float32(x))
		}
	}
	flatten(doc["instances"])
	return out, nil
}

func benchImage(b *testing.B, digits int) { benchImageText(b, imageDoc(digits)) }

// benchImageText is benchImage for the image written as doc.
func benchImageText(b *testing.B, doc []byte) {
	b.Run("baseline", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			out, err := baselineTranslate(doc)
			if err != nil || len(out) != 224*224*3 {
				b.Fatalf("baseline: %d values, %v", len(out), err)
			}
		}
	})
	b.Run("tfsbridge", func(b *testing.B) {
		opt := RequestOptions{Kind: oip.Triton}
		req, _, err := predict.Request(doc, imageResolve, opt)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			req, _, err := predict.Request(doc, imageResolve, opt)
			if err != nil || len(req.Body) < 224*224*3*4 {
				b.Fatalf("tfsbridge: %d bytes, %v", len(req.Body), err)
			}
		}
		// The allocation bar is relative to this size.
		b.ReportMetric(float64(len(req.Body)), "v2-body-B")
	})
}

// BenchmarkRequestImage7 translates a 224×224×3 FP32 image written with
// 7 significant digits.
func BenchmarkRequestImage7(b *testing.B) { benchImage(b, 7) }

// BenchmarkRequestImageFixed6 translates the same image written at a
// fixed precision, six decimals ("0.123456", as printf's %.6f writes
// it): the text jsontext reads in same-shape runs.
func BenchmarkRequestImageFixed6(b *testing.B) { benchImageText(b, imageText('f', 6)) }

// BenchmarkRequestImage17 translates the same image written as Python's
// repr of float64 (what numpy tolist() + json.dumps sends).
func BenchmarkRequestImage17(b *testing.B) { benchImage(b, -1) }

// benchImageChunked compares the whole-body translation with the same body
// written to a RequestStream in chunks of size bytes, each copied into one
// reused buffer first as a proxy receives them.
func benchImageChunked(b *testing.B, digits, size int) {
	doc := imageDoc(digits)
	opt := RequestOptions{Kind: oip.Triton}
	b.Run("whole", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := predict.Request(doc, imageResolve, opt); err != nil {
				b.Fatal(err)
			}
		}
	})
	buf := make([]byte, size)
	chunked := func(b *testing.B) {
		s := predict.NewRequestStream(imageResolve, opt)
		for p := 0; p < len(doc); p += size {
			n := copy(buf, doc[p:])
			if err := s.Write(buf[:n]); err != nil {
				b.Fatal(err)
			}
		}
		req, _, err := s.Close()
		if err != nil || req.Len() < 224*224*3*4 {
			b.Fatalf("chunked: %d bytes, %v", req.Len(), err)
		}
		req.Release()
	}
	b.Run("chunked", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			chunked(b)
		}
	})
	// On a shared machine the two runs above can see different loads;
	// alternating them in one loop gives a ratio both saw alike.
	b.Run("alternating", func(b *testing.B) {
		var whole, chunk time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, _, err := predict.Request(doc, imageResolve, opt); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			chunked(b)
			whole, chunk = whole+t1.Sub(t0), chunk+time.Since(t1)
		}
		b.ReportMetric(float64(chunk)/float64(whole), "chunked/whole")
	})
}

// BenchmarkRequestImage7Chunked16K is RequestImage7 streamed in 16 KiB chunks.
func BenchmarkRequestImage7Chunked16K(b *testing.B) { benchImageChunked(b, 7, 16<<10) }

// BenchmarkRequestImage17Chunked16K is RequestImage17 streamed in 16 KiB chunks.
func BenchmarkRequestImage17Chunked16K(b *testing.B) { benchImageChunked(b, -1, 16<<10) }

// pathImageDoc is the image BenchmarkPath (test/e2e) sends: the same
// 1×224×224×3 rows, but every value d.dddddd in [1, 10) (one integer
// digit and six decimals, where imageDoc's are 0.ddddddd), 1.76 MB.
func pathImageDoc() []byte {
	const n = 224 * 224 * 3
	b := make([]byte, 0, n*10+64)
	b = append(b, `{"instances": [[`...)
	for i := range n {
		switch {
		case i == 0:
			b = append(b, "[["...)
		case i%(224*3) == 0:
			b = append(b, "]], [["...)
		case i%3 == 0:
			b = append(b, "], ["...)
		default:
			b = append(b, ", "...)
		}
		v := 1_000_000 + (i*7919+12345)%9_000_000
		b = strconv.AppendFloat(b, float64(v)/1e6, 'f', 6, 64)
	}
	return append(b, "]]]]}"...)
}

// BenchmarkRequestImagePath decodes BenchmarkPath's image as the BUFFERED
// ext_proc path does: streamed from 16 KiB pieces (the gRPC message's
// frames, read where they lie), the v2 blocks given back after each
// exchange. Its values' shape costs more per value than RequestImage7's
// (an integer digit to read before the fraction): this is the decode the
// whole-path row pays.
func BenchmarkRequestImagePath(b *testing.B) {
	doc := pathImageDoc()
	opt := RequestOptions{Kind: oip.Triton}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		s := predict.NewRequestStream(imageResolve, opt)
		for p := 0; p < len(doc); p += 16 << 10 {
			if err := s.Write(doc[p:min(p+16<<10, len(doc))]); err != nil {
				b.Fatal(err)
			}
		}
		req, _, err := s.Close()
		if err != nil || req.Len() < 224*224*3*4 {
			b.Fatalf("%d bytes, %v", req.Len(), err)
		}
		req.Release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(224*224*3), "ns/value")
}
