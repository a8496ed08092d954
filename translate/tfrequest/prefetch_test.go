package tfrequest

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// prefetchBody is a row body of rows×cols×3 values, PrefetchMinBytes and
// more, its values in the image's shape; odd (0…1) is the share of values
// written as tokens the fast path leaves to ParseNumber or that are errors
// in the given list (exponents, "-0", long fractions, "01").
func prefetchBody(rows int, odd float64, tokens []string, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	value := func() string {
		if r.Float64() < odd {
			return tokens[r.IntN(len(tokens))]
		}
		return strconv.FormatFloat(1+r.Float64()*9, 'f', 6, 64)
	}
	lines, row, rgb := make([]string, rows), make([]string, 224), make([]string, 3)
	for y := range lines {
		for x := range row {
			for c := range rgb {
				rgb[c] = value()
			}
			row[x] = "[" + strings.Join(rgb, ", ") + "]"
		}
		lines[y] = "[" + strings.Join(row, ", ") + "]"
	}
	return []byte(`{"instances": [[` + strings.Join(lines, ", ") + `]], "signature_name": "serving_default"}`)
}

// waitPrefetch makes every prefetch of the test finish before the decoder
// goes on, so that the decoder takes the whole tail from it.
func waitPrefetch(t *testing.T) {
	t.Cleanup(func() { startPrefetch = jsontext.StartPrefetch })
	startPrefetch = func(chunks [][]byte, data []byte, p int, wide bool) *jsontext.Prefetch {
		pf := jsontext.StartPrefetch(chunks, data, p, wide)
		if pf != nil {
			<-pf.Exited()
		}
		return pf
	}
}

// aheadDecode decodes body in chunks of size bytes announced whole first
// (Ahead), as the BUFFERED session does; taken is how many values came
// from the prefetch.
func aheadDecode(body []byte, sig *tensor.Signature, lim tensor.Limits, size int) (r *Request, taken int, err error) {
	chunks := slices.Collect(slices.Chunk(body, size))
	d := NewDecoder(fixed(sig), lim)
	d.Ahead(chunks)
	for _, c := range chunks {
		_ = d.Write(c) // Close says the same
	}
	if d.pf != nil {
		taken = d.pf.Taken
	}
	r, err = d.Close()
	return r, taken, err
}

// TestPrefetchAnswers: a body whose tail was read ahead answers exactly
// as the tape oracle, tensors or error text, with FP32 and FP64 inputs,
// whole (Parse) and in pieces, odd tokens and errors in the tail, and the
// element limit met there; the image takes most of its values from the
// prefetch.
func TestPrefetchAnswers(t *testing.T) {
	if PrefetchMinBytes > 400<<10 {
		t.Fatalf("the bodies below are too small for PrefetchMinBytes %d", PrefetchMinBytes)
	}
	waitPrefetch(t)
	odd := []string{"1e-3", "-0", "0.12345678901234567890123", "-2.5E2", "7", "-0.0", "123456789012345678"}
	cases := []struct {
		name string
		body []byte
		lim  tensor.Limits
	}{
		{"image", prefetchBody(224, 0, nil, 1), tensor.Limits{}},
		{"odd tokens", prefetchBody(224, 0.01, odd, 2), tensor.Limits{}},
		{"01 in the tail", prefetchBody(224, 0.00002, []string{"01"}, 3), tensor.Limits{}},
		{"a string in the tail", prefetchBody(224, 0.00002, []string{`"1, 2, 3"`}, 4), tensor.Limits{}},
		{"element limit in the tail", prefetchBody(224, 0, nil, 5), tensor.Limits{MaxElements: 224 * 224 * 3 * 4 / 5}},
	}
	for _, c := range cases {
		for _, dt := range []string{"x:FP32", "x:FP64"} {
			sig := sigOf(dt)
			exact, exErr := tapeParse(c.body, fixed(sig), c.lim)
			whole, err := Parse(c.body, fixed(sig), c.lim)
			sameAnswer(t, c.body[:80], exact, exErr, whole, err, c.name+" "+dt+" whole")
			for _, size := range []int{16 << 10, 100_003} {
				got, taken, err := aheadDecode(c.body, sig, c.lim, size)
				sameAnswer(t, c.body[:80], exact, exErr, got, err, c.name+" "+dt+" "+strconv.Itoa(size))
				if c.name == "image" && taken < 224*224*3/3 {
					t.Errorf("%s %s in %d-byte pieces: %d values from the prefetch", c.name, dt, size, taken)
				}
			}
			if exErr == nil {
				exact.Release()
			}
		}
	}
}

// TestPrefetchAbort: a decoder aborted midway, its prefetch running, has
// stopped it when Abort returns (the body's memory may be reused then).
func TestPrefetchAbort(t *testing.T) {
	body := prefetchBody(224, 0, nil, 6)
	chunks := slices.Collect(slices.Chunk(body, 16<<10))
	for _, upTo := range []int{0, 1, len(chunks) / 2, len(chunks) - 1} {
		d := NewDecoder(fixed(sigOf("x:FP32")), tensor.Limits{})
		d.Ahead(chunks)
		for _, c := range chunks[:upTo] {
			if err := d.Write(c); err != nil {
				t.Fatal(err)
			}
		}
		pf := d.pf
		d.Abort()
		if d.pf != nil || d.ahead != nil {
			t.Fatal("Abort kept the prefetch")
		}
		if pf != nil {
			select {
			case <-pf.Exited():
			default:
				t.Fatalf("after %d pieces: Abort returned before the prefetcher stopped", upTo)
			}
		}
	}
}
