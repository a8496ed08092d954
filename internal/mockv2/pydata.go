package mockv2

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/x448/float16"
)

// KServe and MLServer turn request data into numpy arrays:
// np.array(data, dtype).reshape(shape) for JSON data, np.frombuffer for
// binary blocks. This file reproduces the outcomes that matter on the wire
// (which inputs work, and the exception type and text of those that do
// not) without numpy's full casting rules.

// pyException is a Python exception escaping the model server: KServe
// answers 500 {"error": "<Type> : <msg>"}, MLServer a plain-text 500.
type pyException struct {
	typ string
	msg string
}

func (e *pyException) text() string { return e.typ + " : " + e.msg }

// numpyName is numpy's name for a datatype, as error texts print it.
func numpyName(dt tensor.DataType) string {
	switch dt {
	case tensor.Bool:
		return "bool"
	case tensor.FP16:
		return "float16"
	case tensor.FP32:
		return "float32"
	case tensor.FP64:
		return "float64"
	case tensor.Bytes:
		return "object"
	}
	return strings.ToLower(dt.String())
}

// pyShapeRepr is a Python tuple's repr: "(2,)", "(2, 3)".
func pyShapeRepr(shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatInt(d, 10)
	}
	if len(shape) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// numpyMaxDims is numpy's NPY_MAXDIMS.
const numpyMaxDims = 64

// nestedShape is the shape numpy discovers for nested lists, or its error
// for ragged ones, in one linear pass. The nesting is regular up to the
// shallower of: the depth above the first depth whose arrays differ in
// length, and the first depth holding both scalars and lists.
func nestedShape(v jval) ([]int64, *pyException) {
	if v.kind() != jArray {
		return nil, nil
	}
	var (
		dims     []int64 // length of the first array closed at each depth
		counts   []int64 // element counts of the open arrays
		mismatch = math.MaxInt
		minLeaf  = math.MaxInt
		maxArray = 0
	)
	for i := 0; i < len(v); {
		switch v[i] {
		case '[':
			if len(counts) > 0 {
				counts[len(counts)-1]++
			}
			counts = append(counts, 0)
			d := len(counts)
			if d > numpyMaxDims {
				return nil, &pyException{"ValueError", "setting an array element with a sequence. The requested array would " +
					"exceed the maximum number of dimension of 64."}
			}
			maxArray = max(maxArray, d)
			if len(dims) < d {
				dims = append(dims, -1)
			}
			i++
		case ']':
			d := len(counts)
			c := counts[d-1]
			counts = counts[:d-1]
			if dims[d-1] < 0 {
				dims[d-1] = c
			} else if dims[d-1] != c {
				mismatch = min(mismatch, d)
			}
			i++
		case ',', ' ', '\t', '\n', '\r':
			i++
		default:
			counts[len(counts)-1]++
			minLeaf = min(minLeaf, len(counts))
			i = skipValue(v, i)
		}
	}
	regular := maxArray
	if mismatch != math.MaxInt {
		regular = mismatch - 1
	}
	if minLeaf < maxArray {
		regular = min(regular, minLeaf)
	}
	if regular < maxArray {
		return nil, &pyException{"ValueError", "setting an array element with a sequence. The requested array has an " +
			"inhomogeneous shape after " + strconv.Itoa(regular) + " dimensions. The detected shape was " +
			pyShapeRepr(dims[:regular]) + " + inhomogeneous part."}
	}
	return dims, nil
}

// reshapeTarget resolves numpy's one allowed -1 in a reshape to size
// elements, or reports numpy's error.
func reshapeTarget(size int64, shape []int64) ([]int64, *pyException) {
	fail := &pyException{"ValueError", "cannot reshape array of size " + strconv.FormatInt(size, 10) +
		" into shape " + pyTuple(shape)}
	out := append([]int64(nil), shape...)
	infer, known := -1, int64(1)
	for i, d := range shape {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			return nil, &pyException{"ValueError", "can only specify one unknown dimension"}
		default:
			if d != 0 && known > math.MaxInt64/d {
				return nil, fail
			}
			known *= d
		}
	}
	if infer >= 0 {
		if known == 0 || size%known != 0 {
			return nil, fail
		}
		out[infer] = size / known
		return out, nil
	}
	if known != size {
		return nil, fail
	}
	return out, nil
}

// leaves collects the scalar leaves of data in row-major order; a
// non-array data is one scalar (MLServer accepts any JSON value).
func leaves(data jval) []jval {
	if data.kind() != jArray {
		return []jval{data}
	}
	var out []jval
	_ = walkLeaves(data, math.MaxInt, func(e jval) error {
		out = append(out, e)
		return nil
	})
	return out
}

// pyCoerce builds the tensor np.array(data, dtype).reshape(shape) gives.
// base64 decodes BYTES strings first (MLServer's Base64Codec, which passes
// invalid base64 through unchanged).
func pyCoerce(name string, dt tensor.DataType, shape []int64, data jval, b64 bool) (tensor.Tensor, *pyException) {
	t := tensor.Tensor{Name: name, DataType: dt}
	if _, exc := nestedShape(data); exc != nil {
		return t, exc
	}
	ls := leaves(data)
	target, exc := reshapeTarget(int64(len(ls)), shape)
	if exc != nil {
		return t, exc
	}
	t.Shape = target
	if dt == tensor.Bytes {
		t.Strings = make([][]byte, len(ls))
		for i, l := range ls {
			t.Strings[i] = pyStr(l, b64)
		}
		return t, nil
	}
	size := dt.Size()
	t.Data = make([]byte, len(ls)*size)
	for i, l := range ls {
		if exc := putPyElem(t.Data[i*size:], dt, l); exc != nil {
			return t, exc
		}
	}
	return t, nil
}

// pyStr is the bytes a BYTES element becomes: a string's UTF-8, else the
// Python str() of the value.
func pyStr(v jval, b64 bool) []byte {
	switch v.kind() {
	case jString:
		s := v.decodeString()
		if b64 {
			if dec, err := base64.StdEncoding.DecodeString(string(s)); err == nil {
				return dec
			}
		}
		return append([]byte(nil), s...)
	case jBool:
		if v.isTrue() {
			return []byte("True")
		}
		return []byte("False")
	case jNull:
		return []byte("None")
	}
	return append([]byte(nil), v...)
}

// putPyElem stores one leaf as numpy would convert it to dt.
func putPyElem(d []byte, dt tensor.DataType, v jval) *pyException {
	if dt == tensor.Bool {
		d[0] = byte(b2i(pyTruthy(v)))
		return nil
	}
	isFloat := dt == tensor.FP16 || dt == tensor.FP32 || dt == tensor.FP64
	var f float64
	var i int64
	var u uint64
	exact := false // an integer value held exactly in i/u
	switch v.kind() {
	case jBool:
		i, u, f, exact = int64(b2i(v.isTrue())), uint64(b2i(v.isTrue())), float64(b2i(v.isTrue())), true
	case jNumber:
		n := v.number()
		f = n.f
		if n.isInt {
			if !n.isInt64 && !n.isUint64 {
				if !isFloat {
					return &pyException{"OverflowError", "Python integer " + string(v) + " out of bounds for " + numpyName(dt)}
				}
			}
			i, u, exact = n.i, n.u, true
			if n.isInt64 && n.i >= 0 {
				u = uint64(n.i)
			}
		}
	case jString:
		s := strings.TrimSpace(string(v.decodeString()))
		if isFloat {
			pf, err := parsePyFloat(s)
			if err != nil {
				return &pyException{"ValueError", "could not convert string to float: " + pyStrRepr(string(v.decodeString()))}
			}
			f = pf
		} else {
			pi, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
			if err != nil {
				return &pyException{"ValueError", "invalid literal for int() with base 10: " + pyStrRepr(string(v.decodeString()))}
			}
			i, u, f, exact = pi, uint64(pi), float64(pi), true
		}
	case jNull:
		if !isFloat {
			return &pyException{"TypeError", "int() argument must be a string, a bytes-like object or a real number, not 'NoneType'"}
		}
		f = math.NaN()
	default:
		what := "float"
		if !isFloat {
			what = "int"
		}
		return &pyException{"TypeError", what + "() argument must be a string, a bytes-like object or a real number, not '" + v.pythonType() + "'"}
	}
	if isFloat {
		switch dt {
		case tensor.FP16:
			binary.LittleEndian.PutUint16(d, float16Bits(f))
		case tensor.FP32:
			binary.LittleEndian.PutUint32(d, math.Float32bits(float32(f)))
		default:
			binary.LittleEndian.PutUint64(d, math.Float64bits(f))
		}
		return nil
	}
	if !exact {
		// A float cast to an integer type truncates toward zero.
		switch {
		case math.IsNaN(f):
			return &pyException{"ValueError", "cannot convert float NaN to integer"}
		case math.IsInf(f, 0):
			return &pyException{"OverflowError", "cannot convert float infinity to integer"}
		}
		i = int64(f)
		u = uint64(i)
	} else if !intFits(dt, i, u, v) {
		return &pyException{"OverflowError", "Python integer " + pyIntText(v, i) + " out of bounds for " + numpyName(dt)}
	}
	switch dt {
	case tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64:
		u = uint64(i)
	}
	switch dt.Size() {
	case 1:
		d[0] = byte(u)
	case 2:
		binary.LittleEndian.PutUint16(d, uint16(u))
	case 4:
		binary.LittleEndian.PutUint32(d, uint32(u))
	case 8:
		binary.LittleEndian.PutUint64(d, u)
	}
	return nil
}

func pyIntText(v jval, i int64) string {
	if v.kind() == jNumber {
		return string(v)
	}
	return strconv.FormatInt(i, 10)
}

// intFits reports whether an exact integer fits dt (NumPy 2 raises
// OverflowError instead of wrapping).
func intFits(dt tensor.DataType, i int64, u uint64, v jval) bool {
	negative := v.kind() == jNumber && len(v) > 0 && v[0] == '-' || i < 0
	switch dt {
	case tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64:
		if negative {
			return false
		}
		bits := uint(dt.Size() * 8)
		return bits == 64 || u < 1<<bits
	}
	if !negative && u > math.MaxInt64 {
		return false
	}
	bits := uint(dt.Size() * 8)
	if bits == 64 {
		return true
	}
	lim := int64(1) << (bits - 1)
	return i >= -lim && i < lim
}

// parsePyFloat is float(str): decimal literals plus nan/inf spellings.
func parsePyFloat(s string) (float64, error) {
	switch strings.ToLower(strings.TrimLeft(s, "+-")) {
	case "nan", "inf", "infinity":
		return strconv.ParseFloat(s, 64)
	}
	return strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
}

// pyStrRepr is repr() of a str: single-quoted unless it holds a quote.
func pyStrRepr(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	r := strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	s = r.Replace(s)
	if q == "'" {
		s = strings.ReplaceAll(s, "'", `\'`)
	}
	return q + s + q
}

// pyTruthy is Python's bool() of a JSON value.
func pyTruthy(v jval) bool {
	switch v.kind() {
	case jBool:
		return v.isTrue()
	case jNull:
		return false
	case jNumber:
		n := v.number()
		return n.f != 0 || math.IsNaN(n.f)
	case jString:
		return len(v) > 2
	case jArray:
		return v.arrayLen() > 0
	}
	nonEmpty := false
	v.members(func(jval, jval) bool { nonEmpty = true; return false })
	return nonEmpty
}

// pyFrombuffer is np.frombuffer(raw, dtype).reshape(shape) (KServe's
// binary inputs); BYTES blocks are length-prefixed elements.
func pyFrombuffer(name string, dt tensor.DataType, shape []int64, raw []byte) (tensor.Tensor, *pyException) {
	t := tensor.Tensor{Name: name, DataType: dt}
	var count int64
	if dt == tensor.Bytes {
		for off := 0; off < len(raw); {
			if len(raw)-off < 4 {
				return t, &pyException{"error", "unpack_from requires a buffer of at least " + strconv.Itoa(off+4) +
					" bytes for unpacking 4 bytes at offset " + strconv.Itoa(off) + " (actual buffer size is " + strconv.Itoa(len(raw)) + ")"}
			}
			l := int(binary.LittleEndian.Uint32(raw[off:]))
			off += 4
			if len(raw)-off < l {
				return t, &pyException{"error", "unpack_from requires a buffer of at least " + strconv.Itoa(off+l) +
					" bytes for unpacking " + strconv.Itoa(l) + " bytes at offset " + strconv.Itoa(off) +
					" (actual buffer size is " + strconv.Itoa(len(raw)) + ")"}
			}
			t.Strings = append(t.Strings, raw[off:off+l:off+l])
			off += l
			count++
		}
	} else {
		if len(raw)%dt.Size() != 0 {
			return t, &pyException{"ValueError", "buffer size must be a multiple of element size"}
		}
		count = int64(len(raw) / dt.Size())
		t.Data = raw
	}
	target, exc := reshapeTarget(count, shape)
	if exc != nil {
		return t, exc
	}
	t.Shape = target
	return t, nil
}

// float16Bits is numpy's float64 → float16 cast, done through float32 (a
// double rounding that only differs from numpy at exact float16 ties).
func float16Bits(f float64) uint16 { return float16.Fromfloat32(float32(f)).Bits() }
