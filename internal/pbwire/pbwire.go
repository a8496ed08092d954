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

// ErrTooMany reports a repeated field with more values than AppendScalars
// was allowed to keep.
var ErrTooMany = errors.New("more values than allowed")

// errFull stops appendPacked when dst holds limit values.
var errFull = errors.New("pbwire: buffer full")

// AppendScalars appends to dst the values of one occurrence of a repeated
// scalar field (a single value, or a packed run of them of width w: protobuf
// readers take both forms) as their raw 64 bits; the caller converts
// (int64(u), math.Float32frombits(uint32(u)), u != 0). It never lets dst
// hold more than limit values (limit < 0: no bound), returning ErrTooMany
// instead. Per value it calls nothing: this is the form for hot paths.
func AppendScalars(dst []uint64, f *Field, w Width, limit int) ([]uint64, error) {
	if f.Typ != protowire.BytesType {
		if len(dst) == limit {
			return dst, ErrTooMany
		}
		return append(dst, f.U), nil
	}
	dst, _, err := appendPacked(dst, f.V, w, limit)
	if errors.Is(err, errFull) {
		err = ErrTooMany
	}
	return dst, err
}

// Scalars calls add with each value of one occurrence of a repeated scalar
// field, as AppendScalars reads them. It decodes in chunks on the stack, so
// that it allocates nothing and makes one call per value only to add.
func Scalars(f *Field, w Width, add func(u uint64)) error {
	if f.Typ != protowire.BytesType {
		add(f.U)
		return nil
	}
	var buf [32]uint64
	for v := f.V; len(v) > 0; {
		var vals []uint64
		var err error
		vals, v, err = appendPacked(buf[:0], v, w, len(buf))
		for _, u := range vals {
			add(u)
		}
		if err != nil && !errors.Is(err, errFull) {
			return err
		}
	}
	return nil
}

// CheckScalars checks the encoding of one occurrence of a repeated scalar
// field of width w, as protobuf's parsers do, without reading the values: a
// packed run of fixed-width values only needs a whole number of them.
func CheckScalars(f *Field, w Width) error {
	if f.Typ != protowire.BytesType {
		return nil
	}
	if w != Varint {
		if len(f.V)%int(w) != 0 {
			return ErrMalformed
		}
		return nil
	}
	for v := f.V; len(v) > 0; {
		_, n := protowire.ConsumeVarint(v)
		if n < 0 {
			return ErrMalformed
		}
		v = v[n:]
	}
	return nil
}

// appendPacked appends the values of the packed run v to dst until the run
// ends or dst holds limit values (errFull, with the run's unread rest).
func appendPacked(dst []uint64, v []byte, w Width, limit int) ([]uint64, []byte, error) {
	for len(v) > 0 {
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
			return dst, v, ErrMalformed
		}
		if len(dst) == limit {
			return dst, v, errFull
		}
		dst = append(dst, u)
		v = v[n:]
	}
	return dst, v, nil
}
