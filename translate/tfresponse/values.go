package tfresponse

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strings"

	"github.com/x448/float16"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// maxRun is the most elements advance writes between checks of the
// writer's size, so that a streamed body is handed over in pieces of
// about PieceSize bytes however large its tensors.
const maxRun = 1024

// cursor is the position in one value being written: the sub-tensor of t
// with the given shape that starts at element base (a row of t, or all
// of it), written over as many advance calls as its data needs.
type cursor struct {
	t      *tensor.Tensor
	shape  []int64
	base   int64
	n      int64 // elements in the value
	b64    bool
	active bool
	nest   jsontext.Nest // the position within the value
}

// isBytes reports an output written as {"b64": ...} values.
func isBytes(t *tensor.Tensor) bool {
	return t.DataType == tensor.Bytes && strings.HasSuffix(t.Name, bytesSuffix)
}

// start makes c the value of shape at row r of t (row 0 for a whole
// tensor).
func (c *cursor) start(t *tensor.Tensor, shape []int64, r int64) {
	c.t, c.shape, c.b64, c.active = t, shape, isBytes(t), true
	c.n, _ = tensor.NumElements(shape)
	c.base = r * c.n
	c.nest.Reset()
}

// advance writes the value's elements as far as avail, the number of t's
// elements whose data is in place, allows (json_tensor.cc
// AddTensorValues: nested arrays, or a bare value for rank 0), stopping
// early once the writer holds limit bytes. It reports whether the value
// is complete.
func (sc *scratch) advance(c *cursor, avail int64, limit int) bool {
	w := sc.w
	t := c.t
	switch {
	case c.n == 0: // no data to wait for
		sc.writeEmpty(c.shape)
		c.active = false
		return true
	case len(c.shape) == 0:
		if avail <= c.base {
			return false
		}
		sc.writeValues(t, int(c.base), 1, c.b64)
		c.active = false
		return true
	}
	fast := t.DataType == tensor.FP32 && w.SingleLine()
	for done := c.nest.Written(); done < c.n; done = c.nest.Written() {
		end := min(c.n, avail-c.base, done+maxRun)
		if end <= done || len(w.Bytes()) >= limit {
			return false
		}
		if fast {
			w.SingleLineFloat32sPart(&c.nest, c.shape, t.Data[4*(c.base+done):4*(c.base+end)])
		} else {
			sc.writeRun(c, end)
		}
	}
	c.active = false
	return true
}

// writeRun writes the value's elements up to end through the writer's
// array calls, the values of each innermost array in one writeValues.
func (sc *scratch) writeRun(c *cursor, end int64) {
	w := sc.w
	rank := len(c.shape)
	if !c.nest.Started() {
		c.nest.Begin(c.shape)
		for range rank {
			w.StartArray()
		}
	}
	for done := c.nest.Written(); done < end; done = c.nest.Written() {
		k, room := c.nest.Next(c.shape)
		for range k {
			w.EndArray()
		}
		for range k {
			w.StartArray()
		}
		r := min(room, end-done)
		sc.writeValues(c.t, int(c.base+done), int(r), c.b64)
		c.nest.Advance(r)
	}
	if c.nest.Done() {
		for range rank {
			w.EndArray()
		}
	}
}

// writeEmpty writes a value without elements: nested empty arrays.
func (sc *scratch) writeEmpty(shape []int64) {
	w := sc.w
	w.StartArray()
	if len(shape) > 1 {
		for range shape[0] {
			sc.writeEmpty(shape[1:])
		}
	}
	w.EndArray()
}

// writeValues writes elements [off, off+n) of t, one JSON value each
// (json_tensor.cc AddSingleValueAndAdvance). The datatype switch sits
// outside the loops: this is where a large response spends its time.
func (sc *scratch) writeValues(t *tensor.Tensor, off, n int, b64 bool) {
	w := sc.w
	d := t.Data
	switch t.DataType {
	case tensor.FP32:
		w.Float32s(d[4*off : 4*(off+n)])
	case tensor.FP64:
		for i := off; i < off+n; i++ {
			w.Float64(math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:])))
		}
	case tensor.FP16: // DESIGN's departure: written like DT_FLOAT
		for i := off; i < off+n; i++ {
			w.Float32(float16.Frombits(binary.LittleEndian.Uint16(d[2*i:])).Float32())
		}
	case tensor.BF16: // DESIGN's departure: written like DT_FLOAT
		for i := off; i < off+n; i++ {
			w.Float32(tensor.BF16ToFloat32(binary.LittleEndian.Uint16(d[2*i:])))
		}
	case tensor.Int8:
		for i := off; i < off+n; i++ {
			w.Int64(int64(int8(d[i])))
		}
	case tensor.Int16:
		for i := off; i < off+n; i++ {
			w.Int64(int64(int16(binary.LittleEndian.Uint16(d[2*i:]))))
		}
	case tensor.Int32:
		for i := off; i < off+n; i++ {
			w.Int64(int64(int32(binary.LittleEndian.Uint32(d[4*i:]))))
		}
	case tensor.Int64:
		for i := off; i < off+n; i++ {
			w.Int64(int64(binary.LittleEndian.Uint64(d[8*i:])))
		}
	case tensor.Uint8:
		for i := off; i < off+n; i++ {
			w.Uint64(uint64(d[i]))
		}
	case tensor.Uint16: // DESIGN's departure: written as an integer
		for i := off; i < off+n; i++ {
			w.Uint64(uint64(binary.LittleEndian.Uint16(d[2*i:])))
		}
	case tensor.Uint32:
		for i := off; i < off+n; i++ {
			w.Uint64(uint64(binary.LittleEndian.Uint32(d[4*i:])))
		}
	case tensor.Uint64:
		for i := off; i < off+n; i++ {
			w.Uint64(binary.LittleEndian.Uint64(d[8*i:]))
		}
	case tensor.Bool:
		for i := off; i < off+n; i++ {
			w.Bool(d[i] != 0)
		}
	case tensor.Bytes:
		for _, s := range t.Strings[off : off+n] {
			if !b64 {
				w.StringBytes(s)
				continue
			}
			// {"b64": "<standard, padded base64>"} (absl::Base64Escape).
			sc.b64 = base64.StdEncoding.AppendEncode(sc.b64[:0], s)
			w.StartObject()
			w.Key("b64")
			w.StringBytes(sc.b64)
			w.EndObject()
		}
	}
}
