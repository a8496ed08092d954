package oip

import (
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// The binary extension's request body (Triton, KServe): EncodeRequest's
// and EncodeRequestParts' main path.

// encodeBinary writes the binary-extension body. The JSON header is tiny
// and built by hand in a pooled scratch; the body is then allocated once,
// with exact capacity, and the blocks are copied in: a body is about the
// size of the tensors, so this is the one allocation that matters.
func encodeBinary(dst []byte, inputs []tensor.Tensor, opt EncodeOptions) ([]byte, int, string, error) {
	sp := getScratch()
	hdr, total, err := appendBinaryHeader((*sp)[:0], inputs, nil, opt)
	if err != nil {
		putScratch(sp, hdr)
		return dst, 0, "", err
	}
	need := len(hdr) + total
	if cap(dst)-len(dst) < need {
		grown := make([]byte, len(dst), len(dst)+need)
		copy(grown, dst)
		dst = grown
	}
	dst = append(dst, hdr...)
	headerLength := len(hdr)
	putScratch(sp, hdr)
	for i := range inputs {
		dst = appendBlock(dst, &inputs[i], nil)
	}
	return dst, headerLength, ContentTypeBinary, nil
}

// encodeBinaryParts is encodeBinary in parts (EncodeRequestParts): the
// header in an allocation of its own, then the pieces of every input.
func encodeBinaryParts(inputs []tensor.Tensor, data func(int) [][]byte, opt EncodeOptions) ([][]byte, int, string, error) {
	sp := getScratch()
	hdr, _, err := appendBinaryHeader((*sp)[:0], inputs, data, opt)
	if err != nil {
		putScratch(sp, hdr)
		return nil, 0, "", err
	}
	parts := [][]byte{slices.Clone(hdr)}
	putScratch(sp, hdr)
	for i := range inputs {
		t := &inputs[i]
		pieces := piecesOf(data, inputs, i)
		switch t.DataType {
		case tensor.Bytes, tensor.Bool:
			// Built: length prefixes, or bytes normalised to 0/1.
			block := make([]byte, 0, blockSize(t, pieces))
			parts = append(parts, appendBlock(block, t, pieces))
		default:
			for _, p := range pieces {
				if len(p) > 0 {
					parts = append(parts, p)
				}
			}
		}
	}
	return parts, len(parts[0]), ContentTypeBinary, nil
}

// appendBinaryHeader appends the binary extension's JSON header for inputs
// (data as for EncodeRequestParts, nil for whole tensors) and returns it
// with the total size of the blocks that follow it.
func appendBinaryHeader(hdr []byte, inputs []tensor.Tensor, data func(int) [][]byte, opt EncodeOptions) ([]byte, int, error) {
	hdr = appendBodyStart(hdr, opt.ID)
	total := 0
	for i := range inputs {
		t := &inputs[i]
		size, err := binarySize(t, piecesOf(data, inputs, i), opt.Kind)
		if err != nil {
			return hdr, 0, err
		}
		if i > 0 {
			hdr = append(hdr, ',')
		}
		hdr = appendInputHead(hdr, t, true)
		hdr = append(hdr, `,"parameters":{"binary_data_size":`...)
		hdr = strconv.AppendInt(hdr, int64(size), 10)
		hdr = append(hdr, "}}"...)
		total += size
	}
	hdr = append(hdr, `],"parameters":{"binary_data_output":true}}`...)
	return hdr, total, nil
}

// binarySize validates t (its data in pieces, nil for t.Data) for the
// binary extension on kind and returns the size of its block.
func binarySize(t *tensor.Tensor, pieces [][]byte, kind ServerKind) (int, error) {
	if err := checkData(t, pieces); err != nil {
		return 0, err
	}
	switch t.DataType {
	case tensor.BF16:
		if kind != Triton {
			return 0, unsupportedBF16(t, kind)
		}
	case tensor.Bytes:
		for _, s := range t.Strings {
			if uint64(len(s)) > math.MaxUint32 {
				return 0, apierr.InvalidArgumentf("input '%s': a string element of %d bytes exceeds the 4 GiB limit of the v2 binary format", t.Name, len(s))
			}
			if kind == KServe && !utf8.Valid(s) {
				return 0, apierr.InvalidArgumentf("input '%s' holds a string that is not valid UTF-8; the KServe server decodes BYTES tensors as UTF-8 text and cannot accept it", t.Name)
			}
		}
	}
	return blockSize(t, pieces), nil
}

// appendBlock appends t's binary block: the little-endian elements as they
// are (BOOL normalised to 0/1), from its data pieces (nil: t.Data), or for
// BYTES each element as a 4-byte little-endian length and its bytes.
func appendBlock(dst []byte, t *tensor.Tensor, pieces [][]byte) []byte {
	if pieces == nil {
		pieces = [][]byte{t.Data}
	}
	switch t.DataType {
	case tensor.Bytes:
		for _, s := range t.Strings {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)))
			dst = append(dst, s...)
		}
	case tensor.Bool:
		for _, p := range pieces {
			for _, b := range p {
				if b != 0 {
					b = 1
				}
				dst = append(dst, b)
			}
		}
	default:
		for _, p := range pieces {
			dst = append(dst, p...)
		}
	}
	return dst
}
