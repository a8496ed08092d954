package tfrequest

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// bigBody writes a body of n values of one input, row format as rows of
// width values, or columnar as one flat list.
func bigBody(n, width int, columnar bool, value func(i int) string) []byte {
	var b strings.Builder
	if columnar {
		b.WriteString(`{"inputs": [`)
	} else {
		b.WriteString(`{"instances": [[`)
	}
	for i := range n {
		switch {
		case i == 0:
		case !columnar && i%width == 0:
			b.WriteString("], [")
		default:
			b.WriteString(", ")
		}
		b.WriteString(value(i))
	}
	if columnar {
		b.WriteString("]}")
	} else {
		b.WriteString("]]}")
	}
	return []byte(b.String())
}

// TestDecoderBlocks: a streamed body whose data outgrows one block gives
// the tensors Parse gives (compared through Blocks), in full blocks of
// BlockSize but the last, with Data nil; as a whole body the data
// stays one contiguous piece.
func TestDecoderBlocks(t *testing.T) {
	num := func(i int) string { return strconv.Itoa(i%200 - 100) }
	cases := []struct {
		dtype    string
		n        int
		columnar bool
		value    func(int) string
	}{
		{"FP32", 3 * BlockSize / 4, false, func(i int) string { return strconv.FormatFloat(float64(i)/7, 'g', 7, 64) }},
		{"FP64", BlockSize/8*2 + 5, true, func(i int) string { return strconv.FormatFloat(float64(i)/3, 'g', -1, 64) }},
		{"INT8", BlockSize + 30, false, num},
		{"INT64", BlockSize/8 + 1, true, num},
		{"FP16", BlockSize/2 + 20, false, num},
		{"BOOL", BlockSize + 1, true, func(i int) string { return strconv.FormatBool(i%3 == 0) }},
	}
	for _, c := range cases {
		sig := sigOf("x:" + c.dtype)
		n := c.n
		if !c.columnar {
			n -= n % 10 // whole rows
		}
		body := bigBody(n, 10, c.columnar, c.value)
		exact, err := tapeParse(body, fixed(sig), tensor.Limits{})
		if err != nil {
			t.Fatalf("%s: Parse: %v", c.dtype, err)
		}
		size := len(exact.Inputs[0].Data)
		for _, chunk := range []int{1000, 4093, 64 << 10} {
			var cuts []int
			for p := chunk; p < len(body); p += chunk {
				cuts = append(cuts, p)
			}
			got, err := streamCuts(body, fixed(sig), tensor.Limits{}, cuts)
			if err != nil {
				t.Fatalf("%s in %d-byte chunks: %v", c.dtype, chunk, err)
			}
			if d := sameRequest(exact, got); d != "" {
				t.Errorf("%s in %d-byte chunks: %s", c.dtype, chunk, d)
			}
			blocks := got.Blocks(0)
			if want := (size + BlockSize - 1) / BlockSize; len(blocks) != want || got.Inputs[0].Data != nil {
				t.Errorf("%s in %d-byte chunks: %d blocks (Data nil: %v), want %d and nil", c.dtype, chunk, len(blocks), got.Inputs[0].Data == nil, want)
			}
			for i, b := range blocks[:len(blocks)-1] {
				if len(b) != BlockSize {
					t.Errorf("%s: block %d holds %d bytes, want %d", c.dtype, i, len(b), BlockSize)
				}
			}
			got.Release()
			if got.pieces != nil || got.pooled != nil {
				t.Errorf("%s: Release kept the blocks", c.dtype)
			}
		}
		whole, err := Parse(body, fixed(sig), tensor.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if b := whole.Blocks(0); len(b) != 1 || len(b[0]) != size {
			t.Errorf("%s whole body: %d pieces, want 1 of %d bytes", c.dtype, len(b), size)
		}
		whole.Release()
		exact.Release()
	}
}

// TestDuplicateKeyBlocks: an instance object whose key comes twice has
// both lists added (TF's parser adds every member), and the tensor keeps
// the first values added, as many as the instances' shape holds: here
// the first instance's two lists. When that data spans several blocks, a
// stream keeps exactly the values a whole body and the tape oracle keep
// (the stream once failed such a body as undecidable).
func TestDuplicateKeyBlocks(t *testing.T) {
	n := BlockSize / 4 * 3 / 5 // FP32 values per list: two instances' first lists span two blocks
	list := func(base int) string {
		var b strings.Builder
		b.WriteByte('[')
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Itoa(base + i%1000))
		}
		return b.String() + "]"
	}
	body := []byte(`{"instances": [{"x": ` + list(0) + `, "x": ` + list(5000) + `}, {"x": ` + list(10000) + `, "x": ` + list(20000) + `}]}`)
	sig := sigOf("x:FP32")
	for _, chunk := range []int{4093, 64 << 10, len(body)} {
		var cuts []int
		for p := chunk; p < len(body); p += chunk {
			cuts = append(cuts, p)
		}
		checkOnePass(t, body, sig, tensor.Limits{}, cuts)
	}
	got, err := streamCuts(body, fixed(sig), tensor.Limits{}, []int{4093})
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	var data []byte
	for _, b := range got.Blocks(0) {
		data = append(data, b...)
	}
	if len(data) != 2*n*4 {
		t.Fatalf("%d bytes of data, want %d (two instances of %d values)", len(data), 2*n*4, n)
	}
	for i, want := range map[int]float32{0: 0, 1: 1, n: 5000, 2*n - 1: float32(5000 + (n-1)%1000)} {
		if v := math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])); v != want {
			t.Errorf("value %d is %v, want %v (the first instance's two lists)", i, v, want)
		}
	}
}
