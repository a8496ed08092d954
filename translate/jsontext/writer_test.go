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
