package jsontext

import (
	"slices"
	"testing"
)

// BenchmarkPrefetchRun compares, over the image's rows in 16 KiB chunks,
// the prefetcher reading every segment (run), the decoder's side taking
// all of them (take) and AppendDecimals parsing it all (parse): Take must
// be several times cheaper than parsing for the split to pay.
func BenchmarkPrefetchRun(b *testing.B) {
	data := imageRows(224 * 224 * 3)
	chunks := slices.Collect(slices.Chunk(data, 16<<10))
	b.Run("run", func(b *testing.B) {
		for b.Loop() {
			pf := newPrefetch(chunks, 0, 0, false, pfSegment)
			pf.budget = 1 << 30
			pf.at.Store(-1)
			pf.run()
			pf.Close()
		}
	})
	b.Run("take", func(b *testing.B) {
		pf := newPrefetch(chunks, 0, 0, false, pfSegment)
		pf.budget = 1 << 30
		pf.at.Store(-1)
		pf.run()
		dst := make([]byte, 0, 224*224*3*4)
		for b.Loop() {
			pf.ci, pf.si, pf.b, pf.i, pf.loaded = 0, 0, nil, 0, false
			dst = dst[:0]
			for _, c := range chunks {
				p := 0
				for p < len(c) {
					var took int
					dst, p, took, _ = pf.Take(dst, c, p, false, 1<<20, 3, 0)
					if took == 0 {
						p++
					}
				}
			}
		}
		b.ReportMetric(float64(pf.Taken)/float64(b.N), "taken")
	})
	b.Run("parse", func(b *testing.B) {
		dst := make([]byte, 0, 224*224*3*4)
		for b.Loop() {
			dst = dst[:0]
			for _, c := range chunks {
				p := 0
				for p < len(c) {
					var took int
					dst, p, took, _ = AppendDecimals(dst, c, p, false, 1<<20, 3, 0)
					if took == 0 {
						p++
					}
				}
			}
		}
	})
}
