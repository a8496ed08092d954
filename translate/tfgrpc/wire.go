package tfgrpc

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/internal/pbwire"
)

// ErrMalformed reports bytes that are not a valid protobuf message of the
// expected type: truncated, a bad tag or length, or invalid UTF-8 in a
// proto3 string field (which protobuf's C++ parser, and so TF Serving,
// refuses).
var ErrMalformed = pbwire.ErrMalformed

// field is one field occurrence as walk reads it (pbwire.Field).
type field = pbwire.Field

// walk calls f for every field of msg in wire order (pbwire.Walk).
func walk(msg []byte, f func(fl *field) error) error { return pbwire.Walk(msg, f) }

// str returns a proto3 string field's value, refusing invalid UTF-8.
func str(v []byte) (string, error) { return pbwire.Str(v) }

// message accumulates the occurrences of a singular message field, which
// protobuf reads as their merge: the concatenation of their bytes. One
// occurrence, the usual case, stays as it is (aliasing the message, and
// checked when it is decoded); from the second on each is checked on its
// own first, since a concatenation can hide a bad boundary (a truncated
// varint completed by the next occurrence's bytes).
type message struct {
	b []byte
	n int
}

func (m *message) add(v []byte) error {
	m.n++
	switch m.n {
	case 1:
		m.b = v
		return nil
	case 2:
		if err := checkWire(m.b); err != nil {
			return err
		}
		m.b = append(make([]byte, 0, len(m.b)+len(v)), m.b...)
	}
	if err := checkWire(v); err != nil {
		return err
	}
	m.b = append(m.b, v...)
	return nil
}

// checkWire checks the wire structure of one message level.
func checkWire(b []byte) error { return walk(b, func(*field) error { return nil }) }

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
