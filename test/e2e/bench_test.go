package e2e

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"net/http"
	"strconv"
	"testing"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/tfsbridge/tfsbridge/test/envoysim"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	v2 "github.com/tfsbridge/tfsbridge/translate/v2"
)

// imageElements is a 1×224×224×3 image.
const imageElements = 1 * 224 * 224 * 3

// pathPayload is one request of the benchmark in its two forms: the TF
// Serving request a legacy client sends through ext_proc, and the
// equivalent v2 request (pre-encoded, binary extension) a v2 client sends
// straight through Envoy.
type pathPayload struct {
	name   string
	tfPath string
	tfBody []byte
	v2Path string
	v2Body []byte
	v2Hdr  map[string]string
	// check validates the first TF answer.
	check func(b *testing.B, body []byte)
}

// imageValue is element i of the image: seven significant digits,
// d.dddddd, spread over [1, 10).
func imageValue(i int) (float32, []byte) {
	v := 1_000_000 + (i*7919+12345)%9_000_000
	return float32(v) / 1e6, strconv.AppendFloat(nil, float64(v)/1e6, 'f', 6, 64)
}

// benchPayloads builds the small (TF Serving's README example) and image
// payloads. The image is a 1×224×224×3 FP32 row-format request, as a
// client sends it to an image model, to the mock's image_classifier
// (1000 scores out).
func benchPayloads(b *testing.B) []pathPayload {
	small := []float32{1, 2, 5}
	image := make([]float32, imageElements)
	text := []byte(`{"instances": [[`)
	for i := range image {
		v, lit := imageValue(i)
		image[i] = v
		switch {
		case i == 0:
			text = append(text, "[["...)
		case i%(224*3) == 0:
			text = append(text, "]], [["...)
		case i%3 == 0:
			text = append(text, "], ["...)
		default:
			text = append(text, ", "...)
		}
		text = append(text, lit...)
	}
	text = append(text, "]]]]}"...)
	return []pathPayload{
		withV2(b, pathPayload{
			name: "small", tfPath: "/v1/models/half_plus_two:predict", tfBody: []byte(readmeBody),
			check: func(b *testing.B, body []byte) {
				if string(body) != readmeResponse {
					b.Fatalf("TF answer %q, want %q", body, readmeResponse)
				}
			},
		}, "half_plus_two", "x", []int64{3}, small),
		withV2(b, pathPayload{
			name: "image", tfPath: "/v1/models/image_classifier:predict", tfBody: text,
			check: func(b *testing.B, body []byte) {
				prefix := []byte("{\n    \"predictions\": [[")
				if !bytes.HasPrefix(body, prefix) || bytes.Count(body, []byte(", "))+1 != 1000 {
					b.Fatalf("TF answer of %d bytes is not one row of 1000 scores: %.200q", len(body), body)
				}
			},
		}, "image_classifier", "image", []int64{1, 224, 224, 3}, image),
	}
}

// withV2 fills in the v2 form of p: Triton's binary request for the
// model's one FP32 input.
func withV2(b *testing.B, p pathPayload, model, input string, shape []int64, x []float32) pathPayload {
	data := make([]byte, 4*len(x))
	for j, v := range x {
		binary.LittleEndian.PutUint32(data[4*j:], math.Float32bits(v))
	}
	in := []tensor.Tensor{{Name: input, DataType: tensor.FP32, Shape: shape, Data: data}}
	body, hl, ct, err := v2.EncodeRequest(nil, in, v2.EncodeOptions{Kind: v2.Triton})
	if err != nil {
		b.Fatal(err)
	}
	p.v2Path = "/v2/models/" + model + "/infer"
	p.v2Body = body
	p.v2Hdr = map[string]string{"Content-Type": ct, "Inference-Header-Content-Length": strconv.Itoa(hl)}
	return p
}

// BenchmarkPath measures the whole path of one request over loopback:
//
//   - extproc: TF client → envoysim → tfsbridge ext_proc → mock (Triton)
//   - direct: the same request as a v2 client sends it, pre-encoded,
//     through a second envoysim with the ext_proc filter off, to the same
//     mock.
//
// Besides ns/op it reports req/s (sequential, one connection) and, on the
// extproc run, hop-ns/op: what the ext_proc hop and the translation add
// to the direct run measured just before.
func BenchmarkPath(b *testing.B) {
	s := newStack(b, stackConfig{})
	direct, err := envoysim.Start(envoysim.Config{
		ProcessorAddr: s.grpcAddr, // never called: every phase is off
		Upstream:      s.v2URL,
		Mode: &extprocfilterv3.ProcessingMode{
			RequestHeaderMode:   extprocfilterv3.ProcessingMode_SKIP,
			ResponseHeaderMode:  extprocfilterv3.ProcessingMode_SKIP,
			RequestBodyMode:     extprocfilterv3.ProcessingMode_NONE,
			ResponseBodyMode:    extprocfilterv3.ProcessingMode_NONE,
			RequestTrailerMode:  extprocfilterv3.ProcessingMode_SKIP,
			ResponseTrailerMode: extprocfilterv3.ProcessingMode_SKIP,
		},
		BufferLimit: defaultBufferLimit,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = direct.Close() })

	for _, p := range benchPayloads(b) {
		b.Run(p.name, func(b *testing.B) {
			directNs := 0.0
			b.Run("direct", func(b *testing.B) {
				directNs = runPath(b, s.client, direct.URL()+p.v2Path, p.v2Body, p.v2Hdr, func(b *testing.B, resp *http.Response, body []byte) {
					if resp.Header.Get("Inference-Header-Content-Length") == "" {
						b.Fatalf("v2 answer without binary outputs: %.200q", body)
					}
				})
			})
			b.Run("extproc", func(b *testing.B) {
				ns := runPath(b, s.client, s.env.URL()+p.tfPath, p.tfBody, nil, func(b *testing.B, _ *http.Response, body []byte) {
					p.check(b, body)
				})
				if directNs > 0 {
					b.ReportMetric(ns-directNs, "hop-ns/op")
				}
			})
		})
	}
	// newStack's cleanup checks that envoysim saw no protocol violation.
}

// runPath POSTs body to url b.N times, one request at a time, checks the
// first answer with check and every status, reports req/s and returns
// ns/op.
func runPath(b *testing.B, c *http.Client, url string, body []byte, hdr map[string]string,
	check func(*testing.B, *http.Response, []byte)) float64 {
	b.Helper()
	do := func() (*http.Response, []byte) {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d %.300q", url, resp.StatusCode, out)
		}
		return resp, out
	}
	resp, out := do() // warm the connections and the metadata cache
	check(b, resp, out)
	b.SetBytes(int64(len(body)))
	n := 0
	for b.Loop() {
		do()
		n++
	}
	ns := float64(b.Elapsed().Nanoseconds()) / float64(n)
	b.ReportMetric(1e9/ns, "req/s")
	return ns
}
