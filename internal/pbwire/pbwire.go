// Package pbwire walks protobuf messages field by field: the generic wire
// reading under the translator's gRPC packages (translate/tfgrpc,
// translate/oipgrpc), the v2 mock's gRPC service (internal/mockv2) and the
// tests' TF gRPC client (test/internal/tfclient). They read messages with
// protowire rather than generated types so that a tensor's bytes are sliced
// out of the message, not copied. Only the wire format lives here: what a
// field number means stays with each reader, so the mock and the test client
// still check the translator's reading of the messages independently.
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

// Width is how a repeated scalar field's values are laid out when packed.
type Width int

// The packed layouts of the protobuf scalar types.
const (
	Varint  Width = 0 // int32, int64, uint32, uint64, bool, enum
	Fixed32 Width = 4 // float, fixed32, sfixed32
	Fixed64 Width = 8 // double, fixed64, sfixed64
)

// Scalars calls add with each value of one occurrence of a repeated scalar
// field: a single value, or a packed run of them of width w (protobuf
// readers take both forms). Values come as the raw 64 bits: the caller
// converts (int64(u), math.Float32frombits(uint32(u)), u != 0).
func Scalars(f *Field, w Width, add func(u uint64)) error {
	if f.Typ != protowire.BytesType {
		add(f.U)
		return nil
	}
	for v := f.V; len(v) > 0; {
		var u uint64
		var n int
		switch w {
		case Fixed32:
			var x uint32
			x, n = protowire.ConsumeFixed32(v)
			u = uint64(x)
		case Fixed64:
			u, n = protowire.ConsumeFixed64(v)
		default:
			u, n = protowire.ConsumeVarint(v)
		}
		if n < 0 {
			return ErrMalformed
		}
		add(u)
		v = v[n:]
	}
	return nil
}
