package tfgrpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/tfsbridge/tfsbridge/translate/internal/grpcproto"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// fromProto is an oracle for Tensor::FromProto written on the protobuf
// runtime's decoding of the message (dynamicpb), independently of the
// wire code under test: the v2 raw bytes TF's rules give, or the error.
func fromProto(m protoreflect.Message) ([]byte, error) {
	dtype := DType(grpcproto.Get(m, "dtype").Int())
	var shape []int64
	dims := grpcproto.Get(grpcproto.Get(m, "tensor_shape").Message(), "dim").List()
	for i := 0; i < dims.Len(); i++ {
		d := grpcproto.Get(dims.Get(i).Message(), "size").Int()
		if d < 0 || i >= 254 {
			return nil, ErrParse
		}
		shape = append(shape, d)
	}
	n, err := tensor.NumElements(shape)
	if err != nil {
		return nil, ErrParse
	}
	dt, kind := Lookup(dtype)
	switch kind {
	case DTypeBad:
		return nil, ErrParse
	case DTypeNoV2:
		return nil, ErrNoV2
	}
	if n == 0 {
		return nil, nil
	}
	if n > 1<<16 {
		return nil, errors.New("too large for the oracle")
	}
	content := grpcproto.Get(m, "tensor_content").Bytes()
	var elems [][]byte // each element's v2 raw bytes
	if len(content) > 0 {
		if dt == tensor.Bytes {
			lens := make([]uint64, n)
			for i := range lens {
				l, k := binary.Uvarint(content)
				if k <= 0 || k > 5 {
					return nil, ErrParse
				}
				lens[i], content = l&math.MaxUint32, content[k:]
			}
			for _, l := range lens {
				if l > uint64(len(content)) {
					return nil, ErrParse
				}
				elems = append(elems, append(binary.LittleEndian.AppendUint32(nil, uint32(l)), content[:l]...))
				content = content[l:]
			}
			if len(content) > 0 {
				return nil, ErrParse
			}
		} else {
			size := dt.Size()
			if int64(len(content)) != n*int64(size) {
				return nil, ErrParse
			}
			for i := 0; i < len(content); i += size {
				if dt == tensor.Bool && content[i] > 1 {
					return nil, ErrParse
				}
				elems = append(elems, content[i:i+size])
			}
		}
		return bytes.Join(elems, nil), nil
	}
	name := map[tensor.DataType]string{
		tensor.FP32: "float_val", tensor.FP64: "double_val", tensor.Int32: "int_val", tensor.Int16: "int_val",
		tensor.Int8: "int_val", tensor.Uint8: "int_val", tensor.Uint16: "int_val", tensor.Int64: "int64_val",
		tensor.Uint32: "uint32_val", tensor.Uint64: "uint64_val", tensor.Bool: "bool_val", tensor.FP16: "half_val",
		tensor.BF16: "half_val", tensor.Bytes: "string_val",
	}[dt]
	vals := grpcproto.Get(m, name).List()
	for i := 0; i < vals.Len() && int64(i) < n; i++ {
		var e []byte
		switch v := vals.Get(i).Interface().(type) {
		case float32:
			e = binary.LittleEndian.AppendUint32(nil, math.Float32bits(v))
		case float64:
			e = binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))
		case int32:
			e = binary.LittleEndian.AppendUint32(nil, uint32(v))[:dt.Size()]
		case int64:
			e = binary.LittleEndian.AppendUint64(nil, uint64(v))
		case uint32:
			e = binary.LittleEndian.AppendUint32(nil, v)
		case uint64:
			e = binary.LittleEndian.AppendUint64(nil, v)
		case bool:
			e = []byte{0}
			if v {
				e[0] = 1
			}
		case []byte:
			e = append(binary.LittleEndian.AppendUint32(nil, uint32(len(v))), v...)
		}
		elems = append(elems, e)
	}
	zero := make([]byte, 4)
	if dt != tensor.Bytes {
		zero = zero[:0]
		zero = append(zero, make([]byte, dt.Size())...)
	}
	for int64(len(elems)) < n {
		if len(elems) == 0 {
			elems = append(elems, zero)
		} else {
			elems = append(elems, elems[len(elems)-1])
		}
	}
	return bytes.Join(elems, nil), nil
}

// quietNaN32 sets the quiet bit of every NaN among little-endian float32
// elements. protoreflect carries a float32 as a float64, and widening a
// signalling NaN quiets it, so the oracle cannot see the payload the wire
// held; DecodeTensorProto keeps it, as TF's C++ copy of float_val does.
func quietNaN32(raw []byte) []byte {
	out := bytes.Clone(raw)
	for i := 0; i+4 <= len(out); i += 4 {
		if b := binary.LittleEndian.Uint32(out[i:]); b&0x7f800000 == 0x7f800000 && b&0x007fffff != 0 {
			binary.LittleEndian.PutUint32(out[i:], b|0x00400000)
		}
	}
	return out
}

// FuzzTensorProto: any bytes read as a TensorProto give what the oracle
// gives on the protobuf runtime's decoding of them (including whether
// they parse at all).
func FuzzTensorProto(f *testing.F) {
	for _, seed := range []string{
		"08 01 12 08 12 02 08 01 12 02 08 02 22 08 00 00 80 3f 00 00 00 40",
		"08 01 12 00 2a 04 00 00 40 40",
		"08 07 12 04 12 02 08 02 42 02 61 62 42 01 63",
		"08 07 12 04 12 02 08 03 22 05 02 01 00 61 62",
		"08 04 12 04 12 02 08 03 3a 03 ac 02 05",
		"08 13 12 04 12 02 08 02 6a 03 80 f8 03",
		"08 0a 12 04 12 02 08 02 5a 01 01",
		"08 16 12 04 12 02 08 02 82 01 02 ff 01",
		"08 17 12 04 12 02 08 02 8a 01 01 07",
	} {
		f.Add(unhex(f, seed))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, perr := grpcproto.Unmarshal("tensorflow.TensorProto", msg)
		tp, err := DecodeTensorProto(msg)
		if errors.Is(perr, grpcproto.ErrRuntime) {
			return // no oracle for these bytes; the decoder did not panic
		}
		if (perr != nil) != (err != nil) {
			t.Fatalf("protobuf: %v, DecodeTensorProto: %v", perr, err)
		}
		if perr != nil {
			return
		}
		want, werr := fromProto(m)
		if werr != nil && !errors.Is(werr, ErrParse) && !errors.Is(werr, ErrNoV2) {
			return // the oracle's own size guard
		}
		dt, n, err := tp.Check()
		if err == nil {
			_, err = tp.RawSize(dt, n)
		}
		if !errors.Is(err, werr) && (err != nil || werr != nil) {
			t.Fatalf("error %v, oracle %v", err, werr)
		}
		if err != nil {
			return
		}
		got := tp.AppendRaw(nil, dt, n)
		if dt == tensor.FP32 && len(got) == len(want) {
			// Quieted on both sides: the oracle's typed values come
			// quieted, its tensor_content bytes do not.
			got, want = quietNaN32(got), quietNaN32(want)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("raw % x\noracle % x", got, want)
		}
	})
}
