package mockv2

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// checkPerturb refuses a perturbation of a model the mock does not serve
// or by a delta that is not a finite number.
func checkPerturb(models map[string]*model, perturb map[string]float64) error {
	for name, d := range perturb {
		if models[name] == nil {
			return fmt.Errorf("mockv2: cannot perturb unknown model %q", name)
		}
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return fmt.Errorf("mockv2: perturbation of %q must be a finite number, got %v", name, d)
		}
	}
	return nil
}

// perturb adds delta to every floating-point element of out (FP16, FP32,
// FP64; other datatypes are left alone), so that a comparison of this
// mock with an unperturbed one shows that exact error.
func perturb(out []tensor.Tensor, delta float64) {
	for i := range out {
		t := &out[i]
		d := t.Data
		switch t.DataType {
		case tensor.FP32:
			for j := 0; j+4 <= len(d); j += 4 {
				putF32(d, j/4, float32(float64(f32At(d, j/4))+delta))
			}
		case tensor.FP64:
			for j := 0; j+8 <= len(d); j += 8 {
				v := math.Float64frombits(binary.LittleEndian.Uint64(d[j:]))
				binary.LittleEndian.PutUint64(d[j:], math.Float64bits(v+delta))
			}
		case tensor.FP16:
			for j := 0; j+2 <= len(d); j += 2 {
				v := float16.Frombits(binary.LittleEndian.Uint16(d[j:])).Float32()
				binary.LittleEndian.PutUint16(d[j:], float16.Fromfloat32(float32(float64(v)+delta)).Bits())
			}
		}
	}
}
