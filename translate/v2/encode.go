package v2

import (
	"encoding/binary"
	"math"
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
// "outputs" list (so every output comes back binary, spec §6.1), followed
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
		return encodeJSON(dst, inputs, opt)
	}
	return dst, 0, "", apierr.Errorf(apierr.Internal, "v2: unknown server kind %v", opt.Kind)
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
	hdr := (*sp)[:0]
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
		size, err := binarySize(t, opt.Kind)
		if err != nil {
			putScratch(sp, hdr)
			return dst, 0, "", err
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
		dst = appendBlock(dst, &inputs[i])
	}
	return dst, headerLength, ContentTypeBinary, nil
}

// appendInputHead appends `{"name":…,"shape":[…],"datatype":"…"` (no
// closing brace). A rank-0 tensor goes as shape [1] when oneForScalar:
// Triton counts an empty shape as zero elements (spec §4).
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

// binarySize validates t for the binary extension on kind and returns the
// size of its block.
func binarySize(t *tensor.Tensor, kind ServerKind) (int, error) {
	if err := checkTensor(t); err != nil {
		return 0, err
	}
	switch t.DataType {
	case tensor.BF16:
		if kind != Triton {
			return 0, unsupportedBF16(t, kind)
		}
	case tensor.Bytes:
		size := 0
		for _, s := range t.Strings {
			if uint64(len(s)) > math.MaxUint32 {
				return 0, apierr.InvalidArgumentf("input '%s': a string element of %d bytes exceeds the 4 GiB limit of the v2 binary format", t.Name, len(s))
			}
			if kind == KServe && !utf8.Valid(s) {
				return 0, apierr.InvalidArgumentf("input '%s' holds a string that is not valid UTF-8; the KServe server decodes BYTES tensors as UTF-8 text and cannot accept it", t.Name)
			}
			size += 4 + len(s)
		}
		return size, nil
	}
	return len(t.Data), nil
}

// checkTensor rejects a malformed tensor. Callers build tensors from
// parsed requests, so this is a bug guard, reported as an internal error.
func checkTensor(t *tensor.Tensor) error {
	if err := t.Validate(); err != nil {
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
// are (BOOL normalised to 0/1), or for BYTES each element as a 4-byte
// little-endian length and its bytes.
func appendBlock(dst []byte, t *tensor.Tensor) []byte {
	switch t.DataType {
	case tensor.Bytes:
		for _, s := range t.Strings {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)))
			dst = append(dst, s...)
		}
	case tensor.Bool:
		for _, b := range t.Data {
			if b != 0 {
				b = 1
			}
			dst = append(dst, b)
		}
	default:
		dst = append(dst, t.Data...)
	}
	return dst
}
