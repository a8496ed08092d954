package oipgrpc

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// errMalformed reports bytes that are not a valid protobuf message.
var errMalformed = errors.New("malformed protobuf message")

type field struct {
	num protowire.Number
	typ protowire.Type
	v   []byte
	u   uint64
}

// walk calls f for every field of msg in wire order (groups skipped).
func walk(msg []byte, f func(fl *field) error) error {
	var fl field
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return errMalformed
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
			return errMalformed
		}
		msg = msg[n:]
		if err := f(&fl); err != nil {
			return err
		}
	}
	return nil
}

func str(v []byte) (string, error) {
	if !utf8.Valid(v) {
		return "", errMalformed
	}
	return string(v), nil
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
