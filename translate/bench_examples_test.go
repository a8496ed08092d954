package translate

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// A census-like classify request (256 examples of 12 named float features)
// against the same values sent to predict as named row inputs: how much
// more serialized tf.Examples cost than tensors.
func examplesBodies() (examples, rows []byte, rowSig *tensor.Signature) {
	var ex, row strings.Builder
	ex.WriteString(`{"examples": [`)
	row.WriteString(`{"instances": [`)
	rowSig = &tensor.Signature{Batched: true}
	for f := range 12 {
		rowSig.Inputs = append(rowSig.Inputs, tensor.Spec{Name: "f" + strconv.Itoa(f), DataType: tensor.FP32, Shape: []int64{-1}})
	}
	for i := range 256 {
		if i > 0 {
			ex.WriteString(", ")
			row.WriteString(", ")
		}
		ex.WriteByte('{')
		row.WriteByte('{')
		for f := range 12 {
			if f > 0 {
				ex.WriteString(", ")
				row.WriteString(", ")
			}
			kv := `"f` + strconv.Itoa(f) + `": ` + strconv.FormatFloat(float64(i*12+f)/7, 'g', 6, 64)
			ex.WriteString(kv)
			row.WriteString(kv)
		}
		ex.WriteByte('}')
		row.WriteByte('}')
	}
	ex.WriteString("]}")
	row.WriteString("]}")
	return []byte(ex.String()), []byte(row.String()), rowSig
}

func BenchmarkExamplesRequest(b *testing.B) {
	examples, rows, rowSig := examplesBodies()
	b.Run("classify", func(b *testing.B) {
		b.SetBytes(int64(len(examples)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := classify.Request(examples, fixedSig(classifier), RequestOptions{Kind: oip.Triton}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("predict-baseline", func(b *testing.B) {
		b.SetBytes(int64(len(rows)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := predict.Request(rows, fixedSig(rowSig), RequestOptions{Kind: oip.Triton}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
