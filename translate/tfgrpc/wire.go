package tfgrpc

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// ErrMalformed reports bytes that are not a valid protobuf message of the
// expected type: truncated, a bad tag or length, or invalid UTF-8 in a
// proto3 string field (which protobuf's C++ parser, and so TF Serving,
// refuses).
var ErrMalformed = errors.New("malformed protobuf message")

// field is one field of a message as walk reads it: v for length-delimited
// fields (aliasing the message), u for varint and fixed-width ones.
type field struct {
	num protowire.Number
	typ protowire.Type
	v   []byte
	u   uint64
}

// walk calls f for every field of msg in wire order. Groups (deprecated,
// never used by these messages) are skipped whole as unknown fields.
func walk(msg []byte, f func(fl *field) error) error {
	var fl field
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return ErrMalformed
		}
		msg = msg[n:]
		fl = field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			fl.u, n = protowire.ConsumeVarint(msg)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(msg)
			fl.u = uint64(x)
		case protowire.Fixed64Type:
			fl.u, n = protowire.ConsumeFixed64(msg)
		case protowire.BytesType:
			fl.v, n = protowire.ConsumeBytes(msg)
		default:
			n = protowire.ConsumeFieldValue(num, typ, msg)
			if n >= 0 {
				msg = msg[n:]
				continue
			}
		}
		if n < 0 {
			return ErrMalformed
		}
		msg = msg[n:]
		if err := f(&fl); err != nil {
			return err
		}
	}
	return nil
}

// str returns a proto3 string field's value, refusing invalid UTF-8.
func str(v []byte) (string, error) {
	if !utf8.Valid(v) {
		return "", ErrMalformed
	}
	return string(v), nil
}

// merge returns the concatenation of a message field's occurrences, which
// protobuf reads as their merge. One occurrence, the usual case, is
// returned as is (aliasing the message).
func merge(prev, next []byte, seen bool) []byte {
	if !seen {
		return next
	}
	out := make([]byte, 0, len(prev)+len(next))
	return append(append(out, prev...), next...)
}

// Sizes and appenders of the encoder. sizeBytesField and sizeVarintField
// are for field numbers below 16 (one tag byte); the typed fields above
// (uint32_val, uint64_val) are sized where they are written.

func sizeBytesField(n int) int { return 1 + protowire.SizeBytes(n) }

func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendStringField(b []byte, num protowire.Number, v string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}

func appendLenField(b []byte, num protowire.Number, n int) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func sizeVarintField(v uint64) int { return 1 + protowire.SizeVarint(v) }
