// Package pbwire walks protobuf messages field by field for the gRPC wire
// packages (translate/tfgrpc, translate/oipgrpc). They read messages with
// protowire rather than generated types so that a tensor's bytes are
// sliced out of the message, not copied; this is the part of that reading
// both share.
package pbwire

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// ErrMalformed reports bytes that are not a valid protobuf message.
var ErrMalformed = errors.New("malformed protobuf message")

// Field is one field occurrence: its number and wire type, and its value
// (V for length-delimited fields, aliasing the message; U for the others).
type Field struct {
	Num protowire.Number
	Typ protowire.Type
	V   []byte
	U   uint64
}

// Walk calls f for every field of msg in wire order. Groups (deprecated,
// never used by these messages) are skipped whole as unknown fields.
func Walk(msg []byte, f func(fl *Field) error) error {
	var fl Field
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		// A field number beyond 2^29-1 cannot be written in a 32-bit
		// tag: protobuf's parsers refuse it.
		if n < 0 || num > protowire.MaxValidNumber {
			return ErrMalformed
		}
		msg = msg[n:]
		fl = Field{Num: num, Typ: typ}
		switch typ {
		case protowire.VarintType:
			fl.U, n = protowire.ConsumeVarint(msg)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(msg)
			fl.U = uint64(x)
		case protowire.Fixed64Type:
			fl.U, n = protowire.ConsumeFixed64(msg)
		case protowire.BytesType:
			fl.V, n = protowire.ConsumeBytes(msg)
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

// Str returns a proto3 string field's value, refusing invalid UTF-8.
func Str(v []byte) (string, error) {
	if !utf8.Valid(v) {
		return "", ErrMalformed
	}
	return string(v), nil
}

// AppendInt64s appends the values of one occurrence of a repeated int64
// field to dst: a single varint, or a packed run of them (protobuf readers
// take both forms).
func AppendInt64s(dst []int64, f *Field) ([]int64, error) {
	if f.Typ == protowire.VarintType {
		return append(dst, int64(f.U)), nil
	}
	for v := f.V; len(v) > 0; {
		d, n := protowire.ConsumeVarint(v)
		if n < 0 {
			return dst, ErrMalformed
		}
		dst = append(dst, int64(d))
		v = v[n:]
	}
	return dst, nil
}
