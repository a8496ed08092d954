package tfrequest

import (
	"slices"
	"sync"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// A streamed body's numeric data is stored in blocks that never move:
// growth costs one pooled block and no copy, whatever the tensor's size,
// and leaves no outgrown buffer as garbage; the v2 body aliases the blocks
// (Request.Blocks), so the data is written once. An input's first block
// starts small (a pooled buffer) and doubles up to BlockSize, so a small
// request does not pin a whole block. A whole body (Parse) keeps one
// contiguous buffer, presized from the body, faster to fill.

// BlockSize is the size of a streamed input's data blocks. It is a multiple
// of every element size, so a block always holds whole elements.
const BlockSize = 256 << 10

// blockPool holds data blocks between requests, all of BlockSize capacity.
var blockPool = sync.Pool{New: func() any { b := make([]byte, 0, BlockSize); return &b }}

// room makes room for one more element in in.data: a whole body grows it
// as append would; a stream grows the first block up to BlockSize, then
// seals a full block and starts the next.
func (d *Decoder) room(in *input) {
	esz := in.spec.DataType.Size()
	if cap(in.data)-len(in.data) >= esz {
		return
	}
	if d.whole {
		in.data = slices.Grow(in.data, esz)
		return
	}
	if len(in.blocks) == 0 && cap(in.data) < BlockSize {
		// The first block, still from the small pool: double it (the
		// pool gets the grown buffer back).
		grown := make([]byte, len(in.data), min(max(2*cap(in.data), esz), BlockSize))
		copy(grown, in.data)
		in.data = grown
		*in.buf = grown
		return
	}
	in.blocks = append(in.blocks, in.data)
	b := blockPool.Get().(*[]byte)
	d.req.pooled = append(d.req.pooled, b)
	in.buf = b
	in.data = (*b)[:0]
}

// setBlocks makes t's data the first n bytes of a streamed input's blocks,
// in order; Data too when they are one block, else nil.
func (r *Request) setBlocks(t *tensor.Tensor, in *input, n int64) {
	blocks := make([][]byte, 0, len(in.blocks)+1)
	for _, b := range append(in.blocks, in.data) {
		k := min(int64(len(b)), n)
		if k == 0 && len(blocks) > 0 {
			break
		}
		blocks = append(blocks, b[:k:k])
		n -= k
	}
	if len(blocks) == 1 {
		t.Data = blocks[0]
	}
	if r.pieces == nil {
		r.pieces = make([][][]byte, cap(r.Inputs))
	}
	r.pieces[len(r.Inputs)] = blocks
}

// Blocks returns the data of Inputs[i] as the consecutive pieces it is
// stored in, each of whole elements: Data for a whole body (Parse), the
// blocks of a stream (Data nil when it spans several). They alias pooled
// memory owned by the Request, valid until Release. BYTES inputs have none
// (their Strings are the data).
func (r *Request) Blocks(i int) [][]byte {
	if i < len(r.pieces) && r.pieces[i] != nil {
		return r.pieces[i]
	}
	if r.Inputs[i].DataType == tensor.Bytes {
		return nil
	}
	return [][]byte{r.Inputs[i].Data}
}
