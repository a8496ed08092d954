package oip

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// What both request encodings (encode_binary.go, encode_json.go) share:
// the tensor checks, an input's JSON head, its data pieces and the
// scratch buffers bodies are built in.

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

// appendBodyStart appends what every v2 request body starts with: '{',
// the "id" when there is one, and `"inputs":[`.
func appendBodyStart(dst []byte, id string) []byte {
	dst = append(dst, '{')
	if id != "" {
		dst = append(dst, `"id":`...)
		dst = jsontext.AppendString(dst, id)
		dst = append(dst, ',')
	}
	return append(dst, `"inputs":[`...)
}
