package oip

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/x448/float16"
)

// Tensor builders for tests: little-endian bytes from Go values.

func fp32T(name string, shape []int64, vs ...float32) tensor.Tensor {
	b := make([]byte, 0, 4*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return tensor.Tensor{Name: name, DataType: tensor.FP32, Shape: shape, Data: b}
}

func fp64T(name string, shape []int64, vs ...float64) tensor.Tensor {
	b := make([]byte, 0, 8*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return tensor.Tensor{Name: name, DataType: tensor.FP64, Shape: shape, Data: b}
}

func fp16T(name string, shape []int64, vs ...float32) tensor.Tensor {
	b := make([]byte, 0, 2*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint16(b, float16.Fromfloat32(v).Bits())
	}
	return tensor.Tensor{Name: name, DataType: tensor.FP16, Shape: shape, Data: b}
}

func bf16T(name string, shape []int64, vs ...float32) tensor.Tensor {
	b := make([]byte, 0, 2*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint16(b, tensor.BF16FromFloat32(v))
	}
	return tensor.Tensor{Name: name, DataType: tensor.BF16, Shape: shape, Data: b}
}

func int32T(name string, shape []int64, vs ...int32) tensor.Tensor {
	b := make([]byte, 0, 4*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return tensor.Tensor{Name: name, DataType: tensor.Int32, Shape: shape, Data: b}
}

func int64T(name string, shape []int64, vs ...int64) tensor.Tensor {
	b := make([]byte, 0, 8*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return tensor.Tensor{Name: name, DataType: tensor.Int64, Shape: shape, Data: b}
}

func uint64T(name string, shape []int64, vs ...uint64) tensor.Tensor {
	b := make([]byte, 0, 8*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return tensor.Tensor{Name: name, DataType: tensor.Uint64, Shape: shape, Data: b}
}

func boolT(name string, shape []int64, vs ...bool) tensor.Tensor {
	b := make([]byte, len(vs))
	for i, v := range vs {
		if v {
			b[i] = 1
		}
	}
	return tensor.Tensor{Name: name, DataType: tensor.Bool, Shape: shape, Data: b}
}

func bytesT(name string, shape []int64, vs ...string) tensor.Tensor {
	s := make([][]byte, len(vs))
	for i, v := range vs {
		s[i] = []byte(v)
	}
	return tensor.Tensor{Name: name, DataType: tensor.Bytes, Shape: shape, Strings: s}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantAPIErr checks that err is an *apierr.Error with the given code.
func wantAPIErr(t *testing.T, err error, code apierr.Code) *apierr.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", code)
	}
	var e *apierr.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v is not an *apierr.Error", err, err)
	}
	if e.Code != code {
		t.Fatalf("code %v (%v), want %v", e.Code, e, code)
	}
	return e
}
