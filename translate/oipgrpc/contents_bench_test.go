package oipgrpc

import (
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// BenchmarkDecodeTypedContents decodes a ModelInferResponse whose outputs
// come in typed contents rather than raw_output_contents (as some servers
// answer): 8x1000 FP32 scores in packed fp32_contents and 8x1000 INT64
// class ids in packed int64_contents, the per-value path of the wire walk.
func BenchmarkDecodeTypedContents(b *testing.B) {
	const n = 8 * 1000
	var fp32s, int64s []byte
	for i := range n {
		fp32s = protowire.AppendFixed32(fp32s, math.Float32bits(float32(i)/n))
		int64s = protowire.AppendVarint(int64s, uint64(i%1000))
	}
	output := func(name, dt string, field protowire.Number, packed []byte) []byte {
		o := protowire.AppendTag(nil, 1, protowire.BytesType)
		o = protowire.AppendString(o, name)
		o = protowire.AppendTag(o, 2, protowire.BytesType)
		o = protowire.AppendString(o, dt)
		o = protowire.AppendTag(o, 3, protowire.BytesType)
		o = protowire.AppendBytes(o, protowire.AppendVarint(protowire.AppendVarint(nil, 8), 1000))
		contents := protowire.AppendTag(nil, field, protowire.BytesType)
		contents = protowire.AppendBytes(contents, packed)
		o = protowire.AppendTag(o, 5, protowire.BytesType)
		return protowire.AppendBytes(o, contents)
	}
	msg := protowire.AppendTag(nil, 1, protowire.BytesType)
	msg = protowire.AppendString(msg, "m")
	msg = protowire.AppendTag(msg, 5, protowire.BytesType)
	msg = protowire.AppendBytes(msg, output("probs", "FP32", fFP32Contents, fp32s))
	msg = protowire.AppendTag(msg, 5, protowire.BytesType)
	msg = protowire.AppendBytes(msg, output("ids", "INT64", fInt64Contents, int64s))
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := DecodeInferResponse(msg, tensor.DefaultLimits)
		if err != nil || len(m.Tensors) != 2 || len(m.Tensors[1].Data) != 8*n {
			b.Fatal(err)
		}
	}
}
