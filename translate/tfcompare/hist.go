package tfcompare

import "math"

// Histogram counts non-negative errors in log-scale buckets: one for
// exact zeros, four per power of two from 2^MinExp to 2^MaxExp (bounds
// 1, 1.25, 1.5 and 1.75 times the power), one below and one above (+Inf
// and NaN included). The bucket comes from the float's bits, so Add costs
// no logarithm; the fixed size makes a Histogram free to copy and merge.
type Histogram struct {
	Counts [NumBuckets]uint64
	Total  uint64
}

// The range of the power-of-two buckets: about 1e-12 to 1.6e4.
const (
	MinExp = -40
	MaxExp = 14
	// subBuckets per power of two: the top two mantissa bits.
	subBuckets = 4
	// NumBuckets: zero, below, the log buckets, above.
	NumBuckets  = 2 + (MaxExp-MinExp)*subBuckets + 1
	zeroBucket  = 0
	underBucket = 1
	overBucket  = NumBuckets - 1
)

// Bucket returns the bucket of x (x ≥ 0, or NaN).
func Bucket(x float64) int {
	switch {
	case x == 0:
		return zeroBucket
	case !(x < math.Inf(1)): // +Inf and NaN
		return overBucket
	}
	bits := math.Float64bits(x)
	exp := int(bits>>52&0x7ff) - 1023
	if exp < MinExp {
		return underBucket
	}
	if exp >= MaxExp {
		return overBucket
	}
	return 2 + (exp-MinExp)*subBuckets + int(bits>>50&3)
}

// Bounds returns bucket i's range [lo, hi).
func Bounds(i int) (lo, hi float64) {
	switch i {
	case zeroBucket:
		return 0, 0
	case underBucket:
		return 0, math.Ldexp(1, MinExp)
	case overBucket:
		return math.Ldexp(1, MaxExp), math.Inf(1)
	}
	k := i - 2
	exp, sub := MinExp+k/subBuckets, k%subBuckets
	return math.Ldexp(1+float64(sub)/subBuckets, exp), math.Ldexp(1+float64(sub+1)/subBuckets, exp)
}

// Add counts x.
func (h *Histogram) Add(x float64) {
	h.Counts[Bucket(x)]++
	h.Total++
}

// Merge adds o's counts to h's.
func (h *Histogram) Merge(o *Histogram) {
	for i, n := range o.Counts {
		h.Counts[i] += n
	}
	h.Total += o.Total
}

// Quantile returns an upper bound of the q-quantile (0 < q ≤ 1): the upper
// bound of the bucket holding it, so within 25% above the true value (0
// when it is an exact zero, +Inf above the range). It is 0 for an empty
// histogram.
func (h *Histogram) Quantile(q float64) float64 {
	if h.Total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.Total)))
	rank = max(rank, 1)
	var seen uint64
	for i, n := range h.Counts {
		seen += n
		if seen >= rank {
			_, hi := Bounds(i)
			return hi
		}
	}
	return math.Inf(1)
}
