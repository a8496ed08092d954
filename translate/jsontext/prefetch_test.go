package jsontext

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// How a prefetcher is left before the consumer reads (takeAgrees).
const (
	pfRan   = iota // read every segment
	pfHalf         // met the consumer halfway
	pfSmall        // ran out of its budget after a batch
	pfNever        // never ran: the consumer reads alone
	pfModes
)

// takeAgrees splits data into chunks of size bytes (0: one), prefetches
// in segments of seg bytes as mode says, then reads every chunk at every offset
// in order, as a decoder moves on, with Take and with AppendDecimals and
// the same arguments: the results must be the same, bytes, end, count and
// lists. It returns how many values Take found prefetched.
func takeAgrees(t *testing.T, data []byte, size, seg, mode, limit, width int) int {
	t.Helper()
	if size == 0 {
		size = len(data)
	}
	chunks := slices.Collect(slices.Chunk(data, size))
	prefetched := 0
	for _, wide := range []bool{false, true} {
		pf := newPrefetch(chunks, 0, 0, wide, max(seg, 1))
		switch mode {
		case pfRan:
			pf.at.Store(-1)
			pf.run()
		case pfHalf:
			pf.at.Store(int64(len(pf.segs) / 2))
			pf.run()
		case pfSmall:
			pf.at.Store(-1)
			pf.budget = 1
			pf.run()
		default:
			close(pf.exited) // for Close
		}
		elem := pf.size
		for k, c := range chunks {
			for p := range c {
				n := p % max(width, 1)
				want, wend, wtook, wlists := AppendDecimals(make([]byte, 0, limit*elem), c, p, wide, limit, width, n)
				got, gend, gtook, glists := pf.Take(make([]byte, 0, limit*elem), c, p, wide, limit, width, n)
				if !bytes.Equal(got, want) || gend != wend || gtook != wtook || glists != wlists {
					t.Fatalf("chunk %d %q at %d (segment %d, mode %d, limit %d, width %d, n %d, wide %v): Take %x %d %d %d, AppendDecimals %x %d %d %d",
						k, c, p, seg, mode, limit, width, n, wide, got, gend, gtook, glists, want, wend, wtook, wlists)
				}
			}
		}
		prefetched += pf.Taken
		pf.Close()
	}
	return prefetched
}

// pad gives every token room to be taken (decimalLookahead).
func pad(s string) []byte { return []byte(s + strings.Repeat(" ", decimalLookahead)) }

// imageRows is n values of the image BenchmarkPath sends: rows of three.
func imageRows(n int) []byte {
	b := []byte(`{"instances": [[[[`)
	for i := range n {
		switch {
		case i > 0 && i%3 == 0:
			b = append(b, "], ["...)
		case i > 0:
			b = append(b, ", "...)
		}
		b = strconv.AppendFloat(b, float64(1_000_000+(i*7919+12345)%9_000_000)/1e6, 'f', 6, 64)
	}
	return append(b, "]]]]}"...)
}

// TestPrefetchTake: Take is AppendDecimals on the documents where runs
// could mislead it (digits in strings and keys, tokens AppendDecimals
// leaves to ParseNumber, limits met inside a run, lists of another
// width), from every kind of start, chunked and whole, and it really
// takes prefetched values on the image rows.
func TestPrefetchTake(t *testing.T) {
	docs := []struct {
		name string
		data []byte
	}{
		{"image", imageRows(300)},
		{"exponents", pad(`[[1.5e3, 2.5, 3], [4E-2, -0.5, 6], [7.25, 8, 9e0]]`)},
		{"strings", pad(`{"a1": "1, 2, 3", "b": ["0.5, 0.25", 7], "c, 9": [1, 2], "d": "[4, 5]"}`)},
		{"zeros", pad(`[-0, 0, 01, -01, 0.0, -0.0, 00.5, 1.0, 10, -10]`)},
		{"long fractions", pad(`[0.123456789012345678901234, 1.00000000000000000001, 0.30000000000000004, 123456789012345.5]`)},
		{"long integers", pad(`[1234567890123456, 12345678901234567890, -9007199254740993, 99999999999999999999999]`)},
		{"widths", pad(`[[1, 2], [3, 4, 5], [6],[7,8], [9, 10]  , [11, 12],[ 13, 14]]`)},
		{"spacing", pad("[1 ,2,  3,\n4,\t5 , 6]")},
		{"literals", pad(`[true, 1, null, 2.5, NaN, -Infinity, 3]`)},
		{"one long list", pad("[" + strings.Repeat("0.75, ", 1000) + "1]")},
	}
	for _, doc := range docs {
		took := 0
		for _, size := range []int{0, 97, 4096} {
			for _, seg := range []int{7, 300, 1 << 20} {
				for mode := range pfModes {
					for _, limit := range []int{1, 3, 4, 64} {
						for _, width := range []int{-1, 2, 3} {
							took += takeAgrees(t, doc.data, size, seg, mode, limit, width)
						}
					}
				}
			}
		}
		if doc.name == "image" && took == 0 {
			t.Errorf("image: no value taken from the prefetch")
		}
	}
}

// FuzzPrefetchTake: Take against AppendDecimals on any input, chunked,
// prefetched in segments of any size.
func FuzzPrefetchTake(f *testing.F) {
	f.Add(imageRows(30), uint16(0), uint16(40), uint8(0), uint8(9), int8(3))
	f.Add(pad(`{"a": [1, "2, 3", 4e5, -0, 01], "b": [[0.5,1],[2, 3]]}`), uint16(17), uint16(3), uint8(1), uint8(2), int8(2))
	f.Fuzz(func(t *testing.T, data []byte, size, seg uint16, mode, limit uint8, width int8) {
		if len(data) > 1<<14 {
			return
		}
		takeAgrees(t, append(data, strings.Repeat(" ", decimalLookahead)...), int(size), int(seg), int(mode%pfModes), 1+int(limit), int(width))
	})
}

// TestPrefetchConcurrent runs the prefetcher in its goroutine as the
// decoder does (go test -race checks the publication), consumed as it
// goes, and closed midway: Close returns only once the prefetcher has
// stopped, and gives its slot back.
func TestPrefetchConcurrent(t *testing.T) {
	if cap(prefetchSlots) == 0 {
		t.Skip("GOMAXPROCS=1: no prefetch slot")
	}
	data := imageRows(60000)
	chunks := slices.Collect(slices.Chunk(data, 16<<10))
	for _, stopAt := range []int{-1, 0, len(chunks) / 2, len(chunks) - 1} {
		pf := StartPrefetch(chunks, chunks[0], 0, false)
		if pf == nil {
			t.Fatal("no prefetch slot free")
		}
		for k, c := range chunks {
			if k == stopAt {
				break
			}
			for p := 0; p < len(c); p++ {
				got, gend, gtook, glists := pf.Take(make([]byte, 0, 64), c, p, false, 16, 3, 0)
				want, wend, wtook, wlists := AppendDecimals(make([]byte, 0, 64), c, p, false, 16, 3, 0)
				if !bytes.Equal(got, want) || gend != wend || gtook != wtook || glists != wlists {
					t.Fatalf("chunk %d at %d: Take %d %d %d, AppendDecimals %d %d %d", k, p, gend, gtook, glists, wend, wtook, wlists)
				}
				if wtook > 0 {
					p = wend
				}
			}
		}
		pf.Close()
		select {
		case <-pf.exited:
		default:
			t.Fatal("Close returned before the prefetcher stopped")
		}
		if len(prefetchSlots) != 0 {
			t.Fatal("the prefetch slot was not given back")
		}
	}
}
