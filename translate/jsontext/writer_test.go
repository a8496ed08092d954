package jsontext

import (
	"encoding/binary"
	"math"
	"testing"
)

// TestFloat32s: the batch writer gives the bytes of one Float32 call per
// value, in every container and layout, indentation deeper than its
// separator buffer included.
func TestFloat32s(t *testing.T) {
	vals := []float32{0.1, 1, -2.5e-7, float32(math.NaN()), float32(math.Inf(-1)), 3e38, 0, 123456.79}
	le := make([]byte, 0, 4*len(vals))
	for _, v := range vals {
		le = binary.LittleEndian.AppendUint32(le, math.Float32bits(v))
	}
	for _, depth := range []int{0, 1, 3, 20} {
		for _, single := range []bool{false, true} {
			for _, n := range []int{0, 1, 2, len(vals)} {
				write := func(batch bool) string {
					w := NewWriter(nil)
					for range depth {
						w.StartArray()
					}
					w.SetSingleLine(single)
					if depth == 0 {
						w.StartObject()
						w.Key("k")
					}
					w.Float32(7) // values already in the container
					if batch {
						w.Float32s(le[:4*n])
					} else {
						for i := range n {
							w.Float32(math.Float32frombits(binary.LittleEndian.Uint32(le[4*i:])))
						}
					}
					w.Float32(8) // and after
					return string(w.Bytes())
				}
				if got, want := write(true), write(false); got != want {
					t.Errorf("depth %d single %v n %d:\n got %q\nwant %q", depth, single, n, got, want)
				}
			}
		}
	}
}

// TestSingleLineFloat32s: the one-pass nested writer, in one call or in
// parts of any size, gives the bytes of StartArray/Float32/EndArray calls
// in single-line mode, with values before and after (a shape without
// elements is tfresponse's writeEmpty's).
func TestSingleLineFloat32s(t *testing.T) {
	vals := []float32{0.1, 1, -2.5e-7, float32(math.NaN()), 3e38, 0, 123456.79, 5, -1, 0.25, 7, 8,
		0.5, 0.123, 2, float32(math.Inf(-1)), 1e-30, 0.75, 3, 4, 0.1, 6, 7, 9}
	le := make([]byte, 0, 4*len(vals))
	for _, v := range vals {
		le = binary.LittleEndian.AppendUint32(le, math.Float32bits(v))
	}
	var nested func(w *Writer, data []byte, shape []int64)
	nested = func(w *Writer, data []byte, shape []int64) {
		w.StartArray()
		if len(shape) == 1 {
			for i := 0; i < len(data); i += 4 {
				w.Float32(math.Float32frombits(binary.LittleEndian.Uint32(data[i:])))
			}
		} else if shape[0] > 0 {
			step := len(data) / int(shape[0])
			for i := range int(shape[0]) {
				nested(w, data[i*step:(i+1)*step], shape[1:])
			}
		}
		w.EndArray()
	}
	for _, shape := range [][]int64{{1}, {12}, {3, 4}, {2, 3, 2}, {1, 2, 2, 3},
		{2, 4, 3}, {8, 3}, {2, 3, 4, 1}, {1, 1, 24}, {24, 1}, {2, 2, 2, 3}} {
		n := 1
		for _, d := range shape {
			n *= int(d)
		}
		// part 0: nested calls; -1: one SingleLineFloat32sPart call; else
		// SingleLineFloat32sPart with part elements at a time.
		write := func(part int) string {
			w := NewWriter(nil)
			w.StartObject()
			w.Key("predictions")
			w.StartArray()
			w.SetSingleLine(true)
			w.Float32(9)
			switch part {
			case -1:
				var nest Nest // the whole value in one call
				w.SingleLineFloat32sPart(&nest, shape, le[:4*n])
			case 0:
				nested(w, le[:4*n], shape)
			default:
				var nest Nest
				for i := 0; !nest.Done(); i += part {
					w.SingleLineFloat32sPart(&nest, shape, le[4*min(i, n):4*min(i+part, n)])
					if nest.Written() != int64(min(i+part, n)) {
						t.Fatalf("shape %v: %d written after %d", shape, nest.Written(), min(i+part, n))
					}
				}
			}
			w.Float32(10)
			w.SetSingleLine(false)
			w.EndArray()
			w.EndObject()
			return string(w.Bytes())
		}
		want := write(0)
		for _, part := range []int{-1, 1, 2, 4, 5, 7, 13} {
			if got := write(part); got != want {
				t.Errorf("shape %v, part %d:\n got %q\nwant %q", shape, part, got, want)
			}
		}
	}
}
