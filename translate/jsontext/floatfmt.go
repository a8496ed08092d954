package jsontext

import (
	"math"
	"strconv"
)

// AppendFloat32 appends f as TF Serving prints a DT_FLOAT (spec §5.2):
// bare NaN/Infinity/-Infinity; else %.6g, or %.9g when the six-digit text
// does not parse back to the same float32; ".0" appended when the text has
// neither '.' nor an exponent.
func AppendFloat32(dst []byte, f float32) []byte {
	return appendTFFloat(dst, float64(f), 32, 9)
}

// AppendFloat64 appends d as TF Serving prints a DT_DOUBLE: as
// AppendFloat32 but with %.17g as the fallback.
func AppendFloat64(dst []byte, d float64) []byte {
	return appendTFFloat(dst, d, 64, 17)
}

func appendTFFloat(dst []byte, v float64, bits, fallback int) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, "NaN"...)
	case math.IsInf(v, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(v, -1):
		return append(dst, "-Infinity"...)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, v, 'g', 6, 64)
	if back, err := strconv.ParseFloat(string(dst[start:]), bits); err != nil || back != v {
		dst = strconv.AppendFloat(dst[:start], v, 'g', fallback, 64)
	}
	for _, c := range dst[start:] {
		if c == '.' || c == 'e' {
			return dst
		}
	}
	return append(dst, '.', '0')
}

func appendInt(dst []byte, v int64) []byte   { return strconv.AppendInt(dst, v, 10) }
func appendUint(dst []byte, v uint64) []byte { return strconv.AppendUint(dst, v, 10) }
