package oip

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Content types of the request bodies EncodeRequest produces.
const (
	// ContentTypeBinary goes with binary-extension bodies: KServe only
	// takes the bytes path for a non-JSON content type, Triton ignores it.
	ContentTypeBinary = "application/octet-stream"
	// ContentTypeJSON goes with JSON-only bodies (MLServer).
	ContentTypeJSON = "application/json"
)

// EncodeOptions select the request dialect.
type EncodeOptions struct {
	// Kind is the server the body is for.
	Kind ServerKind
	// ID is the request "id"; empty means none is sent.
	ID string
}

// EncodeRequest appends to dst the v2 infer request body for inputs and
// returns it with the Inference-Header-Content-Length value (-1: JSON only,
// send no such header) and the content type.
//
// Triton and KServe get the binary extension: a JSON header naming every
// input with its binary_data_size and asking binary_data_output with no
// "outputs" list (so every output comes back binary, docs/open-inference-protocol.md §6.1), followed
// by each input's block in order. MLServer, which has no binary extension,
// gets JSON "data" (see encodeJSON).
//
// A tensor the server cannot take is a 400 *apierr.Error saying why: BF16
// anywhere but Triton, non-UTF-8 BYTES on KServe, ±Infinity on MLServer.
func EncodeRequest(dst []byte, inputs []tensor.Tensor, opt EncodeOptions) (body []byte, headerLength int, contentType string, err error) {
	switch opt.Kind {
	case Triton, KServe:
		return encodeBinary(dst, inputs, opt)
	case MLServer:
		return encodeJSON(dst, inputs, nil, opt)
	}
	return dst, 0, "", apierr.Errorf(apierr.Internal, "v2: unknown server kind %v", opt.Kind)
}

// EncodeRequestParts is EncodeRequest for tensors whose fixed-size data is
// held in pieces, as a streamed request stores it: data(i) gives
// inputs[i].Data as consecutive slices, each of whole elements (Data itself
// is not read; data is not called for BYTES inputs). The body comes back in
// parts that concatenate to the very bytes EncodeRequest would write. For
// the binary extension the parts are the JSON header, then each input's
// block as the pieces themselves, not copied (they must outlive the
// parts; BOOL and BYTES blocks are built); a JSON-only body is one part.
func EncodeRequestParts(inputs []tensor.Tensor, data func(i int) [][]byte, opt EncodeOptions) (parts [][]byte, headerLength int, contentType string, err error) {
	switch opt.Kind {
	case Triton, KServe:
		return encodeBinaryParts(inputs, data, opt)
	case MLServer:
		body, hl, ct, err := encodeJSON(nil, inputs, data, opt)
		if err != nil {
			return nil, 0, "", err
		}
		return [][]byte{body}, hl, ct, nil
	}
	return nil, 0, "", apierr.Errorf(apierr.Internal, "v2: unknown server kind %v", opt.Kind)
}

// piecesOf is input i's data pieces, nil when data is nil (whole tensors:
// the functions below then read Data).
func piecesOf(data func(int) [][]byte, inputs []tensor.Tensor, i int) [][]byte {
	if data == nil || inputs[i].DataType == tensor.Bytes {
		return nil
	}
	return data(i)
}

// scratchPool holds the buffers request headers and JSON bodies are built
// in before the body is allocated once at its exact size.
var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledScratch bounds the buffers kept in scratchPool, so one huge
// JSON body does not pin its memory.
const maxPooledScratch = 8 << 20

func getScratch() *[]byte { return scratchPool.Get().(*[]byte) }

func putScratch(b *[]byte, used []byte) {
	if cap(used) > maxPooledScratch {
		return
	}
	*b = used[:0]
	scratchPool.Put(b)
}

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
	hdr = append(hdr, '{')
	if opt.ID != "" {
		hdr = append(hdr, `"id":`...)
		hdr = jsontext.AppendString(hdr, opt.ID)
		hdr = append(hdr, ',')
	}
	hdr = append(hdr, `"inputs":[`...)
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

// appendInputHead appends `{"name":…,"shape":[…],"datatype":"…"` (no
// closing brace). A rank-0 tensor goes as shape [1] when oneForScalar:
// Triton counts an empty shape as zero elements (docs/open-inference-protocol.md §4).
func appendInputHead(dst []byte, t *tensor.Tensor, oneForScalar bool) []byte {
	dst = append(dst, `{"name":`...)
	dst = jsontext.AppendString(dst, t.Name)
	dst = append(dst, `,"shape":[`...)
	if len(t.Shape) == 0 && oneForScalar {
		dst = append(dst, '1')
	}
	for j, d := range t.Shape {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, d, 10)
	}
	dst = append(dst, `],"datatype":"`...)
	dst = append(dst, t.DataType.String()...)
	return append(dst, '"')
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

// blockSize is the size of t's binary block.
func blockSize(t *tensor.Tensor, pieces [][]byte) int {
	if t.DataType == tensor.Bytes {
		size := 0
		for _, s := range t.Strings {
			size += 4 + len(s)
		}
		return size
	}
	if pieces == nil {
		return len(t.Data)
	}
	size := 0
	for _, p := range pieces {
		size += len(p)
	}
	return size
}

// checkTensor rejects a malformed tensor. Callers build tensors from
// parsed requests, so this is a bug guard, reported as an internal error.
func checkTensor(t *tensor.Tensor) error {
	if err := t.Validate(); err != nil {
		return apierr.Wrap(apierr.Internal, err, "internal error: malformed tensor for input '"+t.Name+"'")
	}
	return nil
}

// checkData is checkTensor for a tensor whose data is in pieces (nil:
// t.Data): they must hold whole elements, as many as the shape says.
func checkData(t *tensor.Tensor, pieces [][]byte) error {
	if pieces == nil || t.DataType == tensor.Bytes || !t.DataType.Valid() {
		return checkTensor(t)
	}
	sz := t.DataType.Size()
	n, err := tensor.NumElements(t.Shape)
	if err == nil {
		size := 0
		for _, p := range pieces {
			if len(p)%sz != 0 {
				err = fmt.Errorf("tensor %q: a data piece of %d bytes splits an element", t.Name, len(p))
				break
			}
			size += len(p)
		}
		if err == nil && int64(size) != n*int64(sz) {
			err = fmt.Errorf("tensor %q: %w: shape %v needs %d bytes, have %d", t.Name, tensor.ErrShape, t.Shape, n*int64(sz), size)
		}
	}
	if err != nil {
		return apierr.Wrap(apierr.Internal, err, "internal error: malformed tensor for input '"+t.Name+"'")
	}
	return nil
}

func unsupportedBF16(t *tensor.Tensor, kind ServerKind) error {
	return apierr.InvalidArgumentf("input '%s' has datatype BF16, which the %s server does not support", t.Name, kindTitle(kind))
}

func kindTitle(k ServerKind) string {
	switch k {
	case KServe:
		return "KServe"
	case MLServer:
		return "MLServer"
	}
	return "Triton"
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
