package tfresponse

import (
	"encoding/base64"
	"encoding/binary"
	"math"

	"github.com/x448/float16"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// writeTensor writes the sub-tensor of t that starts at element off and
// has the given shape (json_tensor.cc AddTensorValues): nested arrays, or
// a bare value for rank 0. It returns the offset after it.
func (sc *scratch) writeTensor(t *tensor.Tensor, shape []int64, off int, b64 bool) int {
	if len(shape) == 0 {
		sc.writeValues(t, off, 1, b64)
		return off + 1
	}
	w := sc.w
	if t.DataType == tensor.FP32 && w.SingleLine() {
		n := 1
		for _, d := range shape {
			n *= int(d)
		}
		w.SingleLineFloat32s(t.Data[4*off:4*(off+n)], shape)
		return off + n
	}
	w.StartArray()
	if len(shape) == 1 {
		n := int(shape[0])
		sc.writeValues(t, off, n, b64)
		off += n
	} else {
		for range shape[0] {
			off = sc.writeTensor(t, shape[1:], off, b64)
		}
	}
	w.EndArray()
	return off
}

// writeValues writes elements [off, off+n) of t, one JSON value each
// (json_tensor.cc AddSingleValueAndAdvance). The datatype switch sits
// outside the loops: this is where a large response spends its time.
func (sc *scratch) writeValues(t *tensor.Tensor, off, n int, b64 bool) {
	w := sc.w
	d := t.Data
	switch t.DataType {
	case tensor.FP32:
		w.Float32s(d[4*off : 4*(off+n)])
	case tensor.FP64:
		for i := off; i < off+n; i++ {
			w.Float64(math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:])))
		}
	case tensor.FP16: // DESIGN's departure: written like DT_FLOAT
		for i := off; i < off+n; i++ {
			w.Float32(float16.Frombits(binary.LittleEndian.Uint16(d[2*i:])).Float32())
		}
	case tensor.BF16: // DESIGN's departure: written like DT_FLOAT
		for i := off; i < off+n; i++ {
			w.Float32(tensor.BF16ToFloat32(binary.LittleEndian.Uint16(d[2*i:])))
		}
	case tensor.Int8:
		for i := off; i < off+n; i++ {
			w.Int64(int64(int8(d[i])))
		}
	case tensor.Int16:
		for i := off; i < off+n; i++ {
			w.Int64(int64(int16(binary.LittleEndian.Uint16(d[2*i:]))))
		}
	case tensor.Int32:
		for i := off; i < off+n; i++ {
			w.Int64(int64(int32(binary.LittleEndian.Uint32(d[4*i:]))))
		}
	case tensor.Int64:
		for i := off; i < off+n; i++ {
			w.Int64(int64(binary.LittleEndian.Uint64(d[8*i:])))
		}
	case tensor.Uint8:
		for i := off; i < off+n; i++ {
			w.Uint64(uint64(d[i]))
		}
	case tensor.Uint16: // DESIGN's departure: written as an integer
		for i := off; i < off+n; i++ {
			w.Uint64(uint64(binary.LittleEndian.Uint16(d[2*i:])))
		}
	case tensor.Uint32:
		for i := off; i < off+n; i++ {
			w.Uint64(uint64(binary.LittleEndian.Uint32(d[4*i:])))
		}
	case tensor.Uint64:
		for i := off; i < off+n; i++ {
			w.Uint64(binary.LittleEndian.Uint64(d[8*i:]))
		}
	case tensor.Bool:
		for i := off; i < off+n; i++ {
			w.Bool(d[i] != 0)
		}
	case tensor.Bytes:
		for _, s := range t.Strings[off : off+n] {
			if !b64 {
				w.StringBytes(s)
				continue
			}
			// {"b64": "<standard, padded base64>"} (absl::Base64Escape).
			sc.b64 = base64.StdEncoding.AppendEncode(sc.b64[:0], s)
			w.StartObject()
			w.Key("b64")
			w.StringBytes(sc.b64)
			w.EndObject()
		}
	}
}
