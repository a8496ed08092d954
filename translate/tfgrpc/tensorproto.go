package tfgrpc

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// The ways a TensorProto can fail Tensor::FromProto, or fail to have a v2
// form.
var (
	// ErrParse is TF's "tensor parsing error": an invalid shape, an
	// invalid dtype, a tensor_content of the wrong size, a bad string
	// list or a DT_BOOL byte other than 0 and 1.
	ErrParse = errors.New("tensor parsing error")
	// ErrNoV2 is a dtype TF reads but v2 cannot carry.
	ErrNoV2 = errors.New("datatype has no v2 equivalent")
)

// TensorProto is a decoded view of a tensorflow.TensorProto. Content
// aliases the message it was decoded from; the typed values are read from
// the message again when written (AppendRaw), never boxed.
type TensorProto struct {
	// DType is the dtype field as sent (any int32).
	DType DType
	// Shape is tensor_shape's dims; meaningful when ShapeOK.
	Shape []int64
	// ShapeOK reports a shape TensorShape::IsValid accepts: every dim
	// at least 0, rank at most 254, element count within int64.
	ShapeOK bool
	// Content is tensor_content (its last occurrence).
	Content []byte

	msg    []byte
	counts [fTPUint64Val + 1]int64 // elements per typed field
}

// DecodeTensorProto decodes msg. It fails only on malformed wire bytes
// (ErrMalformed), as protobuf's parser would: what TF refuses later is
// reported by Check and RawSize.
func DecodeTensorProto(msg []byte) (TensorProto, error) {
	t := TensorProto{msg: msg, ShapeOK: true}
	var shape message
	err := walk(msg, func(f *field) error {
		switch {
		case f.Num == fTPDtype && f.Typ == protowire.VarintType:
			t.DType = DType(int32(f.U))
		case f.Num == fTPShape && f.Typ == protowire.BytesType:
			return shape.add(f.V)
		case f.Num == fTPContent && f.Typ == protowire.BytesType:
			t.Content = f.V
		case f.Num == fTPStringVal && f.Typ == protowire.BytesType:
			t.counts[fTPStringVal]++
		case f.Num >= fTPFloatVal && f.Num <= fTPUint64Val:
			w, ok := repeatedScalar(f.Num)
			if !ok {
				return nil
			}
			switch f.Typ {
			case w:
				t.counts[f.Num]++
			case protowire.BytesType:
				n, ok := packedCount(f.V, w)
				if !ok {
					return ErrMalformed
				}
				t.counts[f.Num] += n
			}
		}
		return nil
	})
	if err != nil {
		return TensorProto{}, err
	}
	if err := t.decodeShape(shape.b); err != nil {
		return TensorProto{}, err
	}
	return t, nil
}

// repeatedScalar is the element wire type of TensorProto's repeated
// scalar fields (scomplex_val 9 and dcomplex_val 12 included, so that
// their packed bytes are checked as protobuf would).
func repeatedScalar(num protowire.Number) (protowire.Type, bool) {
	switch num {
	case fTPFloatVal, 9:
		return protowire.Fixed32Type, true
	case fTPDoubleVal, 12:
		return protowire.Fixed64Type, true
	case fTPIntVal, fTPInt64Val, fTPBoolVal, fTPHalfVal, fTPUint32Val, fTPUint64Val:
		return protowire.VarintType, true
	}
	return 0, false
}

// packedCount counts the elements of a packed field, or reports that it
// is malformed.
func packedCount(v []byte, w protowire.Type) (int64, bool) {
	switch w {
	case protowire.Fixed32Type:
		return int64(len(v) / 4), len(v)%4 == 0
	case protowire.Fixed64Type:
		return int64(len(v) / 8), len(v)%8 == 0
	}
	n := int64(0)
	run := 0
	for _, c := range v {
		run++
		if run > 10 {
			return 0, false
		}
		if c < 0x80 {
			// A tenth byte carries bit 63 only: more overflows 64 bits,
			// and protobuf's parsers refuse the message.
			if run == 10 && c > 1 {
				return 0, false
			}
			n++
			run = 0
		}
	}
	return n, run == 0
}

// decodeShape reads the (merged) TensorShapeProto.
func (t *TensorProto) decodeShape(b []byte) error {
	return walk(b, func(f *field) error {
		if f.Num != fShapeDim || f.Typ != protowire.BytesType {
			return nil
		}
		size := int64(0)
		if err := walk(f.V, func(d *field) error {
			switch {
			case d.Num == fDimSize && d.Typ == protowire.VarintType:
				size = int64(d.U)
			case d.Num == fDimName && d.Typ == protowire.BytesType:
				_, err := str(d.V) // a proto3 string: UTF-8 or no parse
				return err
			}
			return nil
		}); err != nil {
			return err
		}
		if size < 0 || len(t.Shape) >= maxRank {
			t.ShapeOK = false
		}
		t.Shape = append(t.Shape, size)
		return nil
	})
}

// Check returns the tensor's datatype and element count as
// Tensor::FromProto sees them: ErrParse for an invalid shape or dtype,
// ErrNoV2 for a dtype v2 lacks.
func (t *TensorProto) Check() (tensor.DataType, int64, error) {
	if !t.ShapeOK {
		return tensor.Invalid, 0, ErrParse
	}
	n, err := tensor.NumElements(t.Shape)
	if err != nil {
		return tensor.Invalid, 0, ErrParse
	}
	dt, kind := Lookup(t.DType)
	switch kind {
	case DTypeBad:
		return tensor.Invalid, 0, ErrParse
	case DTypeNoV2:
		return tensor.Invalid, 0, ErrNoV2
	}
	return dt, n, nil
}

// RawSize returns the size of the tensor's v2 raw contents (n elements of
// dt, BYTES as 4-byte length + bytes), checking what FromProto checks on
// the values: tensor_content's exact size, its string list, its DT_BOOL
// bytes. dt and n are Check's.
func (t *TensorProto) RawSize(dt tensor.DataType, n int64) (int64, error) {
	if n == 0 {
		return 0, nil
	}
	if n > math.MaxInt64/8 {
		// Its byte size overflows: no allocator holds it (and a size
		// computed modulo 2^64 could match a short tensor_content).
		return 0, ErrParse
	}
	if len(t.Content) > 0 {
		if dt == tensor.Bytes {
			total, ok := stringListSize(t.Content, n)
			if !ok {
				return 0, ErrParse
			}
			return total, nil
		}
		if int64(len(t.Content)) != n*int64(dt.Size()) {
			return 0, ErrParse
		}
		if dt == tensor.Bool {
			for _, c := range t.Content {
				if c > 1 {
					return 0, ErrParse
				}
			}
		}
		return int64(len(t.Content)), nil
	}
	if dt != tensor.Bytes {
		return n * int64(dt.Size()), nil
	}
	// Strings: the first min(k, n) values, then the last repeated.
	k := t.counts[fTPStringVal]
	total, i, last := int64(0), int64(0), 0
	_ = walk(t.msg, func(f *field) error {
		if f.Num == fTPStringVal && f.Typ == protowire.BytesType && i < n {
			total += 4 + int64(len(f.V))
			last = len(f.V)
			i++
		}
		return nil
	})
	if k < n {
		total += (n - k) * (4 + int64(last))
	}
	return total, nil
}

// stringListSize checks a DT_STRING tensor_content (TF's
// DecodeStringList: n varint32 lengths, then exactly their bytes) and
// returns its raw size.
func stringListSize(b []byte, n int64) (int64, bool) {
	sum := int64(0)
	for i := int64(0); i < n; i++ {
		l, m := varint32(b)
		if m == 0 {
			return 0, false
		}
		b = b[m:]
		sum += int64(l)
	}
	if sum != int64(len(b)) {
		return 0, false
	}
	return sum + 4*n, true
}

// varint32 reads TF's GetVarint32: at most 5 bytes, the value's low 32
// bits; m is 0 when b holds no such varint.
func varint32(b []byte) (v uint32, m int) {
	for i := 0; i < 5 && i < len(b); i++ {
		v |= uint32(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

// AppendRaw appends the tensor's v2 raw contents, RawSize bytes: n
// elements of dt, little-endian; BYTES as 4-byte length + bytes. It must
// follow a successful RawSize.
func (t *TensorProto) AppendRaw(dst []byte, dt tensor.DataType, n int64) []byte {
	if n == 0 {
		return dst
	}
	if len(t.Content) > 0 {
		if dt != tensor.Bytes {
			return append(dst, t.Content...)
		}
		b := t.Content
		lens := b
		for i := int64(0); i < n; i++ {
			_, m := varint32(b)
			b = b[m:]
		}
		for i := int64(0); i < n; i++ {
			l, m := varint32(lens)
			lens = lens[m:]
			dst = binary.LittleEndian.AppendUint32(dst, l)
			dst = append(dst, b[:l]...)
			b = b[l:]
		}
		return dst
	}
	num := typedField(dt)
	k := t.counts[num]
	if k == 0 {
		size := 4 // an empty string's length
		if dt != tensor.Bytes {
			size = dt.Size()
		}
		return appendZeros(dst, int(n)*size)
	}
	w := elemWire(dt)
	i := int64(0)
	lastAt := len(dst) // where the last value written starts
	_ = walk(t.msg, func(f *field) error {
		if f.Num != num || i >= n {
			return nil
		}
		switch {
		case dt == tensor.Bytes:
			if f.Typ == protowire.BytesType {
				lastAt = len(dst)
				dst = binary.LittleEndian.AppendUint32(dst, uint32(len(f.V)))
				dst = append(dst, f.V...)
				i++
			}
		case f.Typ == w:
			lastAt = len(dst)
			dst = appendElem(dst, dt, f.U)
			i++
		case f.Typ == protowire.BytesType:
			dst, i, lastAt = appendPacked(dst, dt, w, f.V, i, n, lastAt)
		}
		return nil
	})
	if i < n {
		last := dst[lastAt:]
		for ; i < n; i++ {
			dst = append(dst, last...)
		}
	}
	return dst
}

// appendPacked appends the elements of one packed occurrence, up to n in
// all, and returns the new count and where the last element starts.
func appendPacked(dst []byte, dt tensor.DataType, w protowire.Type, v []byte, i, n int64, lastAt int) ([]byte, int64, int) {
	switch w {
	case protowire.Fixed32Type, protowire.Fixed64Type:
		size := 4
		if w == protowire.Fixed64Type {
			size = 8
		}
		k := min(int64(len(v)/size), n-i)
		if k == 0 {
			return dst, i, lastAt
		}
		// float_val and double_val are already little-endian IEEE
		// values of the element's own width: one copy.
		dst = append(dst, v[:int(k)*size]...)
		return dst, i + k, len(dst) - size
	}
	for len(v) > 0 && i < n {
		u, m := protowire.ConsumeVarint(v)
		v = v[m:]
		lastAt = len(dst)
		dst = appendElem(dst, dt, u)
		i++
	}
	return dst, i, lastAt
}

// appendElem appends one typed-field value as a dt element: narrow
// integers keep their low bits (300 as UINT8 is 44), a bool is 0 or 1,
// half_val keeps its low 16 bits.
func appendElem(dst []byte, dt tensor.DataType, u uint64) []byte {
	switch dt {
	case tensor.Bool:
		if u != 0 {
			u = 1
		}
		return append(dst, byte(u))
	case tensor.Int8, tensor.Uint8:
		return append(dst, byte(u))
	case tensor.Int16, tensor.Uint16, tensor.FP16, tensor.BF16:
		return binary.LittleEndian.AppendUint16(dst, uint16(u))
	case tensor.Int32, tensor.Uint32, tensor.FP32:
		return binary.LittleEndian.AppendUint32(dst, uint32(u))
	}
	return binary.LittleEndian.AppendUint64(dst, u)
}

// appendZeros appends n zero bytes.
func appendZeros(dst []byte, n int) []byte {
	dst = slices.Grow(dst, n)
	l := len(dst)
	dst = dst[:l+n]
	clear(dst[l:])
	return dst
}
