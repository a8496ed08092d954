package jsontext

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Prefetch reads the numbers of a body's tail on another core while the
// caller decodes its head, for a body held whole (ext_proc BUFFERED): the
// caller then takes the tail's values ready-made (Take) instead of parsing
// them. At one request at a time the decode is a third of an image
// exchange and the second core is idle; under load no slot is free and
// nothing extra runs.
//
// It is speculative and needs no knowledge of the document: AppendDecimals'
// result for a token starting at offset s depends only on the chunk's
// bytes from s on, so the prefetcher can start anywhere. It records "runs",
// AppendDecimals over a list's values from a plausible token start (a
// digit or '-' after '[', ',' or a space) to where it stops, and goes on
// at the next plausible start. A run in a string or a key is harmless:
// Take only uses a run where the decoder stands exactly at its start,
// asking for numbers, which is never inside a string. Take returns what
// AppendDecimals would for the same arguments, whatever was prefetched.
//
// The prefetcher reads the body in segments (a chunk, or 64 KiB of a
// larger one) from the last one back, publishing each whole, until it
// meets the segment the decoder reads: they meet where both have done
// their share, however late the prefetcher started (a core others share
// may take a millisecond to run it) and however fast each goes.
type Prefetch struct {
	chunks [][]byte
	size   int // element size: 4 (float32) or 8 (float64)
	segs   []pfSeg
	budget int  // bytes of batches the prefetcher may fill
	slot   bool // it holds one of prefetchSlots

	stop   atomic.Bool   // the consumer asks the prefetcher to end
	at     atomic.Int64  // the segment the consumer reads
	exited chan struct{} // closed when the prefetcher no longer reads chunks

	// Taken counts the values Take copied from runs instead of parsing.
	Taken int

	// The consumer's side, the decoder's goroutine only.
	off bool     // Take is AppendDecimals: another width, or an unknown buffer
	ci  int      // chunks[ci] is the chunk Take last read
	si  int      // segs[si] is the segment it reads
	b   *pfBatch // the batch of the next run to look at (nil: none)
	i   int      // and its index there
	// loaded: b was set from segs[si] once published (nil at its end).
	loaded bool
}

// pfSeg is a segment, the runs starting in chunks[chunk][lo:hi], published
// (first) once all are read.
type pfSeg struct {
	chunk, lo, hi int
	first         atomic.Pointer[pfBatch]
}

// pfRun is one run: AppendDecimals over chunks[chunk][start:] with width w
// and n 0 read count values up to end, stepping into lists sibling lists;
// its values are at vals[voff:] of its batch.
type pfRun struct{ chunk, start, end, voff, count, lists, w uint32 }

// pfKey orders positions in the chunks as the decoder reaches them.
func pfKey(chunk, p int) uint64 { return uint64(chunk)<<32 | uint64(p) }

// pfBatch holds a batch of runs, the next one of its segment linked.
type pfBatch struct {
	runs []pfRun
	vals []byte
	next atomic.Pointer[pfBatch]
}

// A batch holds pfBatchRuns runs (3.5 KiB of records: a run is often a
// row of lists) and pfBatchVals bytes of values (2048 float32 values, ~20
// us of parsing); the prefetcher looks at its stop flag once per batch.
const (
	pfBatchRuns = 128
	pfBatchVals = 8 << 10
	pfBatchSize = pfBatchRuns*28 + pfBatchVals
	// pfScanCheck bounds the bytes scanned without a run (a long string)
	// between looks at the stop flag.
	pfScanCheck = 64 << 10
)

// pfSegment is the longest segment: a decoder that reaches the segment
// being read parses it itself, and the prefetcher stops.
const pfSegment = 64 << 10

var pfBatches = sync.Pool{New: func() any {
	return &pfBatch{runs: make([]pfRun, 0, pfBatchRuns), vals: make([]byte, 0, pfBatchVals)}
}}

// prefetchSlots bounds the prefetchers running at once to the cores the
// process has beyond one: under load every core decodes a request of its
// own, and a prefetcher would only take turns with them.
var prefetchSlots = make(chan struct{}, runtime.GOMAXPROCS(0)-1)

// StartPrefetch starts a prefetcher over chunks, the whole rest of a body
// (unchanged until Close returns), for values of a float64 (wide) or
// float32 input, from where the decoder stands, data[p] of chunk data. It
// returns nil when no slot is free or data is not one of chunks. The
// prefetcher fills at most twice as many bytes of runs and values as the
// text it reads, and a batch (budget): float64 values take 8 bytes where
// their text takes about 10, and short lists' runs 28 bytes more.
func StartPrefetch(chunks [][]byte, data []byte, p int, wide bool) *Prefetch {
	k := chunkIndex(chunks, 0, data)
	if k < 0 {
		return nil
	}
	select {
	case prefetchSlots <- struct{}{}:
	default:
		return nil
	}
	pf := newPrefetch(chunks, k, p, wide, pfSegment)
	pf.slot = true
	go pf.run()
	// The new goroutine waits in this P's next slot, which an idle P
	// (or one running an idle GC worker) does not take from at once: in
	// the e2e image row 65% of the prefetchers ran only after the decode.
	// Yielding puts the decoder on the global queue, which the idle P
	// takes (12%).
	runtime.Gosched()
	return pf
}

// newPrefetch returns a prefetcher (not started) of chunks from offset p
// of chunk k on, in segments of at most seg bytes.
func newPrefetch(chunks [][]byte, k, p int, wide bool, seg int) *Prefetch {
	pf := &Prefetch{chunks: chunks, size: 4, exited: make(chan struct{}), ci: k}
	if wide {
		pf.size = 8
	}
	n := 0
	for i, c := range chunks[k:] {
		from := 0
		if i == 0 {
			from = p
		}
		n += (len(c) - from + seg - 1) / seg
		pf.budget += 2 * (len(c) - from)
	}
	pf.budget += pfBatchSize // one batch, however short the text
	// Segments never move: the prefetcher publishes into them.
	pf.segs = make([]pfSeg, n)
	n = 0
	for ; k < len(chunks); k, p = k+1, 0 {
		for lo := p; lo < len(chunks[k]); lo += seg {
			s := &pf.segs[n]
			s.chunk, s.lo, s.hi = k, lo, min(lo+seg, len(chunks[k]))
			n++
		}
	}
	return pf
}

// chunkIndex returns the index of data among chunks[from:] (the same
// memory), or -1.
func chunkIndex(chunks [][]byte, from int, data []byte) int {
	for i := from; i < len(chunks); i++ {
		if c := chunks[i]; len(c) == len(data) && len(c) > 0 && &c[0] == &data[0] {
			return i
		}
	}
	return -1
}

// run is the prefetcher: segment by segment from the last, until it meets
// the consumer's, spends its budget or is stopped.
func (pf *Prefetch) run() {
	defer func() {
		if pf.slot {
			<-prefetchSlots
		}
		close(pf.exited)
	}()
	used := 0
	for s := len(pf.segs) - 1; s >= 0 && int64(s) > pf.at.Load() && !pf.stop.Load(); s-- {
		seg := &pf.segs[s]
		first, ok := pf.segment(seg, &used)
		seg.first.Store(first)
		if !ok {
			return
		}
	}
}

// segment reads the runs starting in seg into batches and returns the
// first, and whether to go on (not stopped, budget left).
func (pf *Prefetch) segment(seg *pfSeg, used *int) (first *pfBatch, ok bool) {
	var b *pfBatch // allocated at the first run: the budget holds for every batch
	guess := 0
	data := pf.chunks[seg.chunk]
	p, end := seg.lo, min(seg.hi-1, len(data)-decimalLookahead)
	// A chunk's first byte follows the last of the chunk before: a
	// token cut there is not a run the decoder will start at.
	first0 := seg.chunk == 0 || len(pf.chunks[seg.chunk-1]) == 0 ||
		tokenBefore(pf.chunks[seg.chunk-1][len(pf.chunks[seg.chunk-1])-1])
	for check := p + pfScanCheck; p <= end; {
		if c := data[p]; c != '-' && !isDigit(c) || p > 0 && !tokenBefore(data[p-1]) || p == 0 && !first0 {
			if p++; p >= check {
				if pf.stop.Load() {
					return first, false
				}
				check = p + pfScanCheck
			}
			continue
		}
		if b == nil || len(b.runs) == cap(b.runs) || cap(b.vals)-len(b.vals) < pf.size {
			if *used += pfBatchSize; *used > pf.budget || pf.stop.Load() {
				return first, false
			}
			nb := pfBatches.Get().(*pfBatch)
			if b == nil {
				first = nb
			} else {
				b.next.Store(nb)
			}
			b, check = nb, p+pfScanCheck
		}
		// A run from a list's first value steps on into its siblings
		// of the width the last such run's list had; from inside a
		// list it stops at the list's end, whatever n the decoder has
		// there.
		w := 0
		if listStart(data, p) {
			w = guess
		}
		out, e, took, lists := AppendDecimals(b.vals, data, p, pf.size == 8, (cap(b.vals)-len(b.vals))/pf.size, w, 0)
		if took == 0 {
			p++
			continue
		}
		b.runs = append(b.runs, pfRun{chunk: uint32(seg.chunk), start: uint32(p), end: uint32(e), voff: uint32(len(b.vals)),
			count: uint32(took), lists: uint32(lists), w: uint32(w)})
		if data[e] == ']' && listStart(data, p) {
			guess = took - lists*w // the values of its last list
		}
		b.vals, p = out, e
	}
	return first, true
}

// listStart reports that data[p] is a list's first value ("[" and spaces
// before it).
func listStart(data []byte, p int) bool {
	q := p - 1
	for q >= 0 && (data[q] == ' ' || data[q] == '\n' || data[q] == '\r' || data[q] == '\t') {
		q--
	}
	return q >= 0 && data[q] == '['
}

// tokenBefore reports a byte a list's value follows.
func tokenBefore(c byte) bool { return c == '[' || c == ',' || c == ' ' }

// Take returns exactly what AppendDecimals(dst, data, p, wide, limit,
// width, n) returns, taking prefetched runs where the prefetcher has
// published one at each value the decoder reaches, and parsing where not.
// It steps between runs with AppendDecimals' own separator rule; where no
// run starts, AppendDecimals goes on from there, which composes: its
// result from a value's start depends only on the bytes and the count
// state (n, limit). A segment not published yet is parsed here, and the
// prefetcher, told which segment the decoder reads (find), stops before
// it: Take never waits.
func (pf *Prefetch) Take(dst, data []byte, p int, wide bool, limit, width, n int) (out []byte, end, took, lists int) {
	if pf == nil || pf.off || wide != (pf.size == 8) {
		return AppendDecimals(dst, data, p, wide, limit, width, n)
	}
	if c := pf.chunks[min(pf.ci, len(pf.chunks)-1)]; len(c) != len(data) || len(c) == 0 || &c[0] != &data[0] {
		if pf.ci = chunkIndex(pf.chunks, pf.ci, data); pf.ci < 0 {
			pf.off = true // a buffer not among the chunks (read in order)
			return AppendDecimals(dst, data, p, wide, limit, width, n)
		}
	}
	l0, size := len(dst), pf.size
	end = p
	// The values of consecutive runs lie one after the other in their
	// batch: pend, b.vals[v0:v1], is copied in one go.
	b, i, ci := pf.b, pf.i, uint32(pf.ci)
	var pend *pfBatch
	v0, v1 := 0, 0
	stopped := false
	for limit > 0 {
		if b == nil || i == len(b.runs) || b.runs[i].start != uint32(p) || b.runs[i].chunk != ci {
			pf.b, pf.i = b, i
			r := pf.find(p)
			if b, i = pf.b, pf.i; r == nil {
				break
			}
		}
		r := &b.runs[i]
		c, ls := int(r.count), int(r.lists)
		// A run that stepped into lists did so where n reached w: so
		// does AppendDecimals from the same n with that width, with the
		// limit to count the lists.
		if c+ls > limit || ls > 0 && (n != 0 || width != int(r.w)) {
			break
		}
		if pend != b || int(r.voff) != v1 {
			if pend != nil {
				dst = append(dst, pend.vals[v0:v1]...)
			}
			pend, v0 = b, int(r.voff)
		}
		v1 = int(r.voff) + c*size
		i++
		if n += c; ls > 0 {
			n = c - ls*width // the values in the last list
		}
		lists += ls
		limit -= c + ls
		end = int(r.end)
		// AppendDecimals checks "limit > 1" before counting the value
		// just taken: here it is counted already.
		q, list := separator(data, end, n == width && limit >= 1)
		if q < 0 {
			stopped = true
			break
		}
		p = q
		if list {
			n, lists, limit = 0, lists+1, limit-1
		}
	}
	if pend != nil {
		dst = append(dst, pend.vals[v0:v1]...)
	}
	pf.b, pf.i = b, i
	took = (len(dst) - l0) / size
	pf.Taken += took
	if stopped {
		return dst, end, took, lists
	}
	out, e, t, l := AppendDecimals(dst, data, p, wide, limit, width, n)
	if t > 0 {
		return out, e, took + t, lists + l
	}
	if n == 0 && lists > 0 {
		lists-- // stepped into a list without taking its first value
	}
	return out, end, took, lists
}

// find returns the published run starting at p of chunks[pf.ci], or nil,
// moving past the runs before it, into p's segment.
func (pf *Prefetch) find(p int) *pfRun {
	if pf.si >= len(pf.segs) {
		return nil
	}
	if seg := &pf.segs[pf.si]; seg.chunk != pf.ci || p >= seg.hi {
		// The consumer reads on in a later segment: tell the
		// prefetcher, which stops before it.
		s := pf.si
		for s < len(pf.segs) && (pf.segs[s].chunk < pf.ci || pf.segs[s].chunk == pf.ci && p >= pf.segs[s].hi) {
			s++
		}
		pf.at.Store(int64(s))
		if pf.si, pf.b, pf.i, pf.loaded = s, nil, 0, false; s == len(pf.segs) {
			return nil
		}
	}
	if !pf.loaded {
		pf.b = pf.segs[pf.si].first.Load()
		pf.loaded = pf.b != nil
	}
	key := pfKey(pf.ci, p)
	for pf.b != nil {
		if pf.i == len(pf.b.runs) {
			pf.b, pf.i = pf.b.next.Load(), 0
			continue
		}
		r := &pf.b.runs[pf.i]
		switch rk := pfKey(int(r.chunk), int(r.start)); {
		case rk < key:
			pf.i++
		case rk == key:
			return r
		default:
			return nil
		}
	}
	return nil
}

// Exited is closed once the prefetcher has stopped reading the chunks: at
// their end, at its budget, or when stopped.
func (pf *Prefetch) Exited() <-chan struct{} { return pf.exited }

// Close stops the prefetcher and waits until it no longer reads the
// chunks (within a batch), then gives its batches back. The Prefetch
// cannot be used afterwards; a nil one does nothing.
func (pf *Prefetch) Close() {
	if pf == nil {
		return
	}
	pf.stop.Store(true)
	<-pf.exited
	for s := range pf.segs {
		for b := pf.segs[s].first.Swap(nil); b != nil; {
			nb := b.next.Swap(nil)
			b.runs, b.vals = b.runs[:0], b.vals[:0]
			pfBatches.Put(b)
			b = nb
		}
	}
	pf.off, pf.b = true, nil
}
