package tfcompare

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"testing"
)

// answer1000 is a 1x1000 FP32 predict answer as TF Serving writes it,
// each score shifted by delta.
func answer1000(delta float64) []byte {
	b := []byte(`{"predictions": [[`)
	for i := range 1000 {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendFloat(b, float64(float32(math.Sin(float64(i))+delta)), 'g', -1, 32)
	}
	return append(b, "]]}"...)
}

// naiveCompare is the straightforward alternative: encoding/json into
// interfaces, then a recursive walk.
func naiveCompare(a, b []byte, tol Tolerance) (maxAbs float64, over int, err error) {
	var va, vb map[string]any
	if err := json.Unmarshal(a, &va); err != nil {
		return 0, 0, err
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		return 0, 0, err
	}
	var walk func(x, y any) error
	walk = func(x, y any) error {
		switch x := x.(type) {
		case []any:
			ys, ok := y.([]any)
			if !ok || len(ys) != len(x) {
				return fmt.Errorf("shape")
			}
			for i := range x {
				if err := walk(x[i], ys[i]); err != nil {
					return err
				}
			}
		case float64:
			yf, _ := y.(float64)
			d := math.Abs(x - yf)
			maxAbs = max(maxAbs, d)
			if d > tol.Abs+tol.Rel*math.Abs(x) {
				over++
			}
		}
		return nil
	}
	return maxAbs, over, walk(va["predictions"], vb["predictions"])
}

func BenchmarkCompare1x1000(b *testing.B) {
	x, y := answer1000(0), answer1000(1e-4)
	b.Run("tfcompare", func(b *testing.B) {
		c := New(DefaultTolerance)
		b.SetBytes(int64(len(x) + len(y)))
		b.ReportAllocs()
		for b.Loop() {
			r := c.Compare(Answer{200, x}, Answer{200, y})
			if r.Outputs[0].Elements != 1000 {
				b.Fatal(r.Outputs[0])
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(x) + len(y)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := naiveCompare(x, y, DefaultTolerance); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The benchmark's answers agree on what they measure.
func TestBenchmarkAnswers(t *testing.T) {
	x, y := answer1000(0), answer1000(1e-4)
	r := Compare(Answer{200, x}, Answer{200, y}, DefaultTolerance)
	maxAbs, over, err := naiveCompare(x, y, DefaultTolerance)
	if err != nil || len(r.Outputs) != 1 || r.Outputs[0].MaxAbs != maxAbs || r.Outputs[0].Over != over || over == 0 {
		t.Fatalf("tfcompare %+v; naive max %g over %d err %v", r.Outputs, maxAbs, over, err)
	}
}
