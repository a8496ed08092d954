package tfresponse

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// Regression: a 75-byte v2 answer declaring shape [60000000, 0] made
// Predict write 720 MB (4.4 GB allocated); long names in multi-output row
// format and high ranks amplified the same way. Predict now refuses such
// outputs with a 502 before writing anything.
func TestPredictBudgetRefusesExpansionBombs(t *testing.T) {
	row, col := tfjson.Row, tfjson.Columnar
	long := strings.Repeat("n", 1000)
	rank2000 := append(make([]int64, 0, 2001), 64)
	for range 2000 {
		rank2000 = append(rank2000, 1)
	}
	cases := []struct {
		name    string
		format  tfjson.Format
		outputs []tensor.Tensor
	}{
		{"empty arrays, row", row, []tensor.Tensor{f32("y", []int64{60_000_000, 0})}},
		{"empty arrays, columnar", col, []tensor.Tensor{f32("y", []int64{60_000_000, 0})}},
		{"empty arrays under a few dims", col, []tensor.Tensor{f32("y", []int64{8000, 8000, 0})}},
		{"long names once per row", row, []tensor.Tensor{
			fixed(long, tensor.Bool, []int64{100_000}, make([]uint64, 100_000)...),
			fixed("b", tensor.Bool, []int64{100_000}, make([]uint64, 100_000)...)}},
		{"rank 2001 indentation", col, []tensor.Tensor{fixed("y", tensor.Bool, rank2000, make([]uint64, 64)...)}},
		{"b64 objects at rank 2001", row, []tensor.Tensor{strs("y_bytes", append([]int64{4096}, rank2000[1:]...), make([]string, 4096)...)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Predict([]byte("keep"), c.outputs, c.format)
			var e *apierr.Error
			if !errors.As(err, &e) || e.Code != apierr.BadGateway {
				t.Fatalf("Predict error = %v, want a BAD_GATEWAY *apierr.Error", err)
			}
			if !strings.HasPrefix(e.Msg, "invalid response from inference server: its outputs would expand") {
				t.Errorf("message = %q", e.Msg)
			}
			if string(got) != "keep" {
				t.Errorf("dst = %q, want it unchanged", got)
			}
		})
	}
}

// The budget must never refuse a real layout: the worst real ones (a
// columnar BOOL tensor of rank 8, one-byte outputs with long names in row
// format) and an empty dimension in a batch of 1000 rows go through.
func TestPredictBudgetAllowsRealLayouts(t *testing.T) {
	cases := []struct {
		name    string
		format  tfjson.Format
		outputs []tensor.Tensor
	}{
		{"columnar BOOL rank 8", tfjson.Columnar, []tensor.Tensor{
			fixed("m", tensor.Bool, []int64{4, 4, 4, 4, 4, 4, 4, 16}, make([]uint64, 1<<18)...)}},
		{"row batch 1000 without detections", tfjson.Row, []tensor.Tensor{
			f32("boxes", []int64{1000, 0, 4}), f32("scores", []int64{1000, 0})}},
		{"row multi-output, 64-byte names", tfjson.Row, []tensor.Tensor{
			fixed(strings.Repeat("a", 64), tensor.Uint8, []int64{1 << 16}, make([]uint64, 1<<16)...),
			fixed(strings.Repeat("b", 64), tensor.Uint8, []int64{1 << 16}, make([]uint64, 1<<16)...)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Predict(nil, c.outputs, c.format); err != nil {
				t.Fatalf("Predict: %v", err)
			}
		})
	}
}

// sizeBound must really bound what Predict writes, whatever the shapes,
// types, names and strings.
func TestSizeBoundIsAnUpperBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := []tensor.DataType{tensor.Bool, tensor.Uint8, tensor.Int8, tensor.Int16, tensor.Uint16, tensor.Int32,
		tensor.Uint32, tensor.Int64, tensor.Uint64, tensor.FP16, tensor.BF16, tensor.FP32, tensor.FP64, tensor.Bytes}
	for iter := range 2000 {
		format := tfjson.Row
		if iter%2 == 1 {
			format = tfjson.Columnar
		}
		nOut := 1 + rng.IntN(3)
		batch := int64(1 + rng.IntN(3))
		outputs := make([]tensor.Tensor, nOut)
		for i := range outputs {
			rank := rng.IntN(5)
			if format == tfjson.Row {
				rank++
			}
			shape := make([]int64, rank)
			n := int64(1)
			for j := range shape {
				shape[j] = int64(rng.IntN(4))
				if j == 0 && format == tfjson.Row {
					shape[j] = batch
				}
				n *= shape[j]
			}
			dt := types[rng.IntN(len(types))]
			name := string(rune('a'+i)) + strings.Repeat("\x01\"", rng.IntN(3))
			if dt == tensor.Bytes && rng.IntN(2) == 0 {
				name += "_bytes"
			}
			o := tensor.Tensor{Name: name, DataType: dt, Shape: shape}
			if dt == tensor.Bytes {
				for range n {
					s := make([]byte, rng.IntN(6))
					for k := range s {
						s[k] = byte(rng.IntN(256))
					}
					o.Strings = append(o.Strings, s)
				}
			} else {
				o.Data = make([]byte, n*int64(dt.Size()))
				for k := range o.Data {
					o.Data[k] = byte(rng.IntN(256))
				}
			}
			outputs[i] = o
		}
		out, err := Predict(nil, outputs, format)
		if err != nil {
			t.Fatalf("case %d: Predict: %v", iter, err)
		}
		batchArg := int64(-1)
		if format == tfjson.Row {
			batchArg = batch
		}
		if bound, _ := sizeBound(outputs, format, batchArg); int64(len(out)) > bound {
			t.Fatalf("case %d: body of %d bytes exceeds its bound %d:\n%s", iter, len(out), bound, out)
		}
	}
}

// PredictWithin caps the body's size bound at the operator's limit, below
// the expansion budget, and hands a large body over without a copy.
func TestPredictWithin(t *testing.T) {
	out := []tensor.Tensor{fixed("y", tensor.Uint8, []int64{1 << 18}, make([]uint64, 1<<18)...)} // bound ≈ 6 B/element
	bound, _ := sizeBound(out, tfjson.Columnar, -1)
	for _, c := range []struct {
		max int64
		ok  bool
	}{
		{0, true},          // the expansion budget alone
		{bound, true},      // exactly the bound
		{bound - 1, false}, // one byte short
		{1 << 10, false},
	} {
		got, err := PredictWithin(nil, out, tfjson.Columnar, c.max)
		var e *apierr.Error
		switch {
		case c.ok && err != nil:
			t.Errorf("max %d: %v", c.max, err)
		case c.ok && int64(len(got)) > bound:
			t.Errorf("max %d: %d bytes, over the bound %d", c.max, len(got), bound)
		case !c.ok && (!errors.As(err, &e) || e.Code != apierr.BadGateway || !strings.Contains(e.Msg, "would expand")):
			t.Errorf("max %d: error %v, want a BAD_GATEWAY expansion error", c.max, err)
		}
	}
	want, _ := Predict([]byte{}, out, tfjson.Columnar) // copied into dst
	got, _ := Predict(nil, out, tfjson.Columnar)       // possibly handed over
	if string(got) != string(want) {
		t.Error("a handed-over body differs from a copied one")
	}
	again, _ := Predict(nil, out, tfjson.Columnar)
	if len(got) > 0 && len(again) > 0 && &got[0] == &again[0] {
		t.Error("two calls returned the same buffer")
	}
}
