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
		// A field number beyond 2^29-1 cannot be written in a 32-bit
		// tag: protobuf's parsers refuse it.
		if n < 0 || num > protowire.MaxValidNumber {
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

// checkParameters checks a map<string, InferParameter> entry as protobuf
// parses it: the wire, a UTF-8 key, a UTF-8 string_param. tfsbridge
// reads no parameter, but a message protobuf would refuse is refused.
func checkParameters(entry []byte) error {
	return walk(entry, func(f *field) error {
		if f.typ != protowire.BytesType {
			return nil
		}
		switch f.num {
		case 1:
			_, err := str(f.v)
			return err
		case 2:
			return walk(f.v, func(p *field) error {
				if p.num == 3 && p.typ == protowire.BytesType {
					_, err := str(p.v)
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
		if f.typ != protowire.BytesType || f.num < fBoolContents || f.num > fFP64Contents {
			return nil
		}
		for v := f.v; len(v) > 0; {
			var n int
			switch f.num {
			case fFP32Contents:
				_, n = protowire.ConsumeFixed32(v)
			case fFP64Contents:
				_, n = protowire.ConsumeFixed64(v)
			default:
				_, n = protowire.ConsumeVarint(v)
			}
			if n < 0 {
				return errMalformed
			}
			v = v[n:]
		}
		return nil
	})
}
