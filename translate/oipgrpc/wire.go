package oipgrpc

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/internal/pbwire"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// field is one field occurrence as walk reads it (pbwire.Field).
type field = pbwire.Field

// walk calls f for every field of msg in wire order (pbwire.Walk).
func walk(msg []byte, f func(fl *field) error) error { return pbwire.Walk(msg, f) }

// str returns a proto3 string field's value, refusing invalid UTF-8.
func str(v []byte) (string, error) { return pbwire.Str(v) }

// appendInt64s appends one occurrence of a repeated int64 field (a shape's
// dims), packed or not, to dst.
func appendInt64s(dst []int64, f *field) ([]int64, error) {
	err := pbwire.Scalars(f, pbwire.Varint, func(u uint64) { dst = append(dst, int64(u)) })
	return dst, err
}

func sizeBytesField(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

func sizeStringField(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return sizeBytesField(num, len(s))
}

func appendStringField(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendLenField(b []byte, num protowire.Number, n int) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

// growExact makes room for n more bytes.
func growExact(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n)
	copy(nb, b)
	return nb
}

// bad is the error for a v2 message that cannot be translated: a
// BadGateway, which the gRPC pipeline answers as INTERNAL.
func bad(what string, cause error, format string, args ...any) *apierr.Error {
	return apierr.Wrap(apierr.BadGateway, cause, "invalid "+what+" from inference server: "+fmt.Sprintf(format, args...))
}

// wrapBad is bad for an error walk returned, unless it already is one.
func wrapBad(what string, err error) error {
	var e *apierr.Error
	if errors.As(err, &e) {
		return err
	}
	return bad(what, err, "%v", err)
}

// checkParameters checks a map<string, InferParameter> entry as protobuf
// parses it: the wire, a UTF-8 key, a UTF-8 string_param. tfsbridge
// reads no parameter, but a message protobuf would refuse is refused.
func checkParameters(entry []byte) error {
	return walk(entry, func(f *field) error {
		if f.Typ != protowire.BytesType {
			return nil
		}
		switch f.Num {
		case 1:
			_, err := str(f.V)
			return err
		case 2:
			return walk(f.V, func(p *field) error {
				if p.Num == 3 && p.Typ == protowire.BytesType {
					_, err := str(p.V)
					return err
				}
				return nil
			})
		}
		return nil
	})
}

// checkContents checks every packed field of an InferTensorContents (the
// ones of other datatypes than the tensor's included), as protobuf parses
// them.
func checkContents(contents []byte) error {
	return walk(contents, func(f *field) error {
		if f.Typ != protowire.BytesType || f.Num < fBoolContents || f.Num > fFP64Contents {
			return nil
		}
		return pbwire.CheckScalars(f, contentsWidth(f.Num))
	})
}

// contentsWidth is the packed layout of a typed InferTensorContents field.
func contentsWidth(num protowire.Number) pbwire.Width {
	switch num {
	case fFP32Contents:
		return pbwire.Fixed32
	case fFP64Contents:
		return pbwire.Fixed64
	}
	return pbwire.Varint
}
