package tensor

// Limits bound what a parser may build from an untrusted body. Every parser
// in tfsbridge checks declared sizes and counts against them, and against
// the bytes that actually arrived, before allocating.
type Limits struct {
	// MaxDepth is the deepest JSON nesting accepted (Triton uses 100).
	MaxDepth int
	// MaxElements is the most tensor elements one body may carry in all.
	MaxElements int64
	// MaxOutputBytes caps the TF body a response translation may write
	// (its size bound, checked before writing), on top of the writer's own
	// expansion budget; 0 means that budget alone. The session sets it in
	// proportion to the body limit.
	MaxOutputBytes int64
}

// DefaultLimits are the limits used when a caller sets none: deep enough
// for any real tensor, small enough that a hostile body cannot make a
// parser allocate without bound.
var DefaultLimits = Limits{MaxDepth: 100, MaxElements: 64 << 20}

// OrDefault returns l with zero fields replaced by DefaultLimits.
func (l Limits) OrDefault() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultLimits.MaxDepth
	}
	if l.MaxElements <= 0 {
		l.MaxElements = DefaultLimits.MaxElements
	}
	return l
}
