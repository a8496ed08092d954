package tensor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/x448/float16"
)

// Tensor is a named, typed, shaped block of elements.
//
// For fixed-size datatypes the elements live in Data as little-endian
// row-major bytes (len(Data) == NumElements()*DataType.Size()); for BYTES
// they live in Strings, one byte string per element, and Data is nil. Both
// may alias a larger buffer (a request or response body): a Tensor never
// owns more than it says.
type Tensor struct {
	Name     string
	DataType DataType
	// Shape is the dimension list; nil or empty means a scalar (rank 0).
	Shape   []int64
	Data    []byte
	Strings [][]byte
}

// ErrShape reports a shape whose element count is negative or overflows.
var ErrShape = errors.New("invalid tensor shape")

// NumElements returns the product of the dimensions (1 for a scalar), or an
// error when a dimension is negative or the product overflows int64.
func NumElements(shape []int64) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("%w: negative dimension %d", ErrShape, d)
		}
		if d != 0 && n > math.MaxInt64/d {
			return 0, fmt.Errorf("%w: element count overflows", ErrShape)
		}
		n *= d
	}
	return n, nil
}

// ShapeString writes a shape as TF's TensorShape::DebugString and
// ShapeToString do, the text its error messages quote: "[2,3]", "[]" for
// a scalar.
func ShapeString(shape []int64) string {
	b := []byte{'['}
	for i, d := range shape {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, d, 10)
	}
	return string(append(b, ']'))
}

// Len returns the number of elements actually held.
func (t *Tensor) Len() int {
	if t.DataType == Bytes {
		return len(t.Strings)
	}
	if s := t.DataType.Size(); s > 0 {
		return len(t.Data) / s
	}
	return 0
}

// Validate checks that the data held matches the shape and datatype.
func (t *Tensor) Validate() error {
	if !t.DataType.Valid() {
		return fmt.Errorf("tensor %q: invalid datatype", t.Name)
	}
	n, err := NumElements(t.Shape)
	if err != nil {
		return fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if t.DataType == Bytes {
		if int64(len(t.Strings)) != n {
			return fmt.Errorf("tensor %q: %w: shape %v needs %d elements, have %d", t.Name, ErrShape, t.Shape, n, len(t.Strings))
		}
		return nil
	}
	if int64(len(t.Data)) != n*int64(t.DataType.Size()) {
		return fmt.Errorf("tensor %q: %w: shape %v needs %d bytes, have %d", t.Name, ErrShape, t.Shape, n*int64(t.DataType.Size()), len(t.Data))
	}
	return nil
}

// The element accessors below read element i of a fixed-size tensor. They
// exist for tests, the mock server and cold paths; hot loops index Data
// directly.

// Float64At returns element i of a numeric or BOOL tensor as a float64.
func (t *Tensor) Float64At(i int) float64 {
	d := t.Data
	switch t.DataType {
	case Bool, Uint8:
		return float64(d[i])
	case Int8:
		return float64(int8(d[i]))
	case Uint16:
		return float64(binary.LittleEndian.Uint16(d[2*i:]))
	case Int16:
		return float64(int16(binary.LittleEndian.Uint16(d[2*i:])))
	case Uint32:
		return float64(binary.LittleEndian.Uint32(d[4*i:]))
	case Int32:
		return float64(int32(binary.LittleEndian.Uint32(d[4*i:])))
	case Uint64:
		return float64(binary.LittleEndian.Uint64(d[8*i:]))
	case Int64:
		return float64(int64(binary.LittleEndian.Uint64(d[8*i:])))
	case FP16:
		return float64(float16.Frombits(binary.LittleEndian.Uint16(d[2*i:])).Float32())
	case BF16:
		return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(d[2*i:])) << 16))
	case FP32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:])))
	case FP64:
		return math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:]))
	}
	panic(fmt.Sprintf("tensor: Float64At on %v", t.DataType))
}

// Int64At returns element i of an integer or BOOL tensor as an int64
// (UINT64 values above MaxInt64 wrap; use Uint64At for those).
func (t *Tensor) Int64At(i int) int64 {
	switch t.DataType {
	case Uint64:
		return int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
	case Int64:
		return int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
	}
	return int64(t.Float64At(i))
}

// Uint64At returns element i of an integer tensor as a uint64.
func (t *Tensor) Uint64At(i int) uint64 { return uint64(t.Int64At(i)) }

// BF16FromFloat32 converts to bfloat16 the way tritonclient does: the upper
// half of the float32 bits (truncation toward zero, no rounding).
func BF16FromFloat32(f float32) uint16 { return uint16(math.Float32bits(f) >> 16) }

// BF16ToFloat32 widens a bfloat16 to float32 exactly.
func BF16ToFloat32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }
