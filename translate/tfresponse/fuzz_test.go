package tfresponse

import (
	"errors"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// FuzzPredict feeds Predict arbitrary tensors (any datatype byte, shapes
// with zero, negative and huge dimensions, data of any length): it must
// never panic, and every failure must be an *apierr.Error.
func FuzzPredict(f *testing.F) {
	f.Add([]byte{11, 2, 2, 3, 0, 0, 128, 63, 0, 0, 0, 64}, "y", false)
	f.Add([]byte{14, 1, 2, 'h', 'i'}, "x_bytes", true)
	f.Add([]byte{0, 2, 255, 0}, "z", true)
	f.Fuzz(func(t *testing.T, spec []byte, name string, columnar bool) {
		if len(spec) < 2 {
			return
		}
		dt := tensor.DataType(spec[0] % 20)
		rank := int(spec[1] % 5)
		rest := spec[2:]
		shape := make([]int64, 0, rank)
		for i := 0; i < rank && len(rest) > 0; i++ {
			d := int64(int8(rest[0]))
			if d == 127 {
				d = 1 << 40
			}
			shape = append(shape, d)
			rest = rest[1:]
		}
		t1 := tensor.Tensor{Name: name, DataType: dt, Shape: shape, Data: rest}
		if dt == tensor.Bytes {
			t1.Data = nil
			for _, b := range rest {
				t1.Strings = append(t1.Strings, []byte{b, '"', 0})
			}
		}
		t2 := tensor.Tensor{Name: name + "_2", DataType: tensor.Int8, Shape: shape, Data: rest}
		format := tfjson.Row
		if columnar {
			format = tfjson.Columnar
		}
		for _, outs := range [][]tensor.Tensor{{t1}, {t1, t2}} {
			out, err := Predict(nil, outs, format)
			if err != nil {
				if e := (*apierr.Error)(nil); !errors.As(err, &e) {
					t.Fatalf("error %v is %T, not *apierr.Error", err, err)
				}
				if out != nil {
					t.Fatalf("output %q with error %v", out, err)
				}
			} else if len(out) == 0 {
				t.Fatal("no output and no error")
			}
		}
	})
}
