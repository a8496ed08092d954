package framepool

import "testing"

// TestFramePool checks the tiers: every Get has the length asked for and a
// capacity of its tier, a buffer Put comes back from a tier it fills, and
// sizes outside the tiers still work.
func TestFramePool(t *testing.T) {
	p := New()
	tests := []struct {
		n       int
		wantCap int
	}{
		{0, 256}, {1, 256}, {256, 256}, {257, 512}, {16 << 10, 16 << 10}, {16<<10 + 9, 32 << 10},
		{1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1},
	}
	for _, tt := range tests {
		b := p.Get(tt.n)
		if len(*b) != tt.n || cap(*b) != tt.wantCap {
			t.Errorf("Get(%d): len %d cap %d, want len %d cap %d", tt.n, len(*b), cap(*b), tt.n, tt.wantCap)
		}
		p.Put(b)
	}
	// A buffer whose capacity is not a power of two goes to the tier below,
	// so that every buffer of a tier holds the tier's size.
	odd := make([]byte, 3000)
	p.Put(&odd)
	for range 10 { // sync.Pool may drop it; whatever comes back must fit
		b := p.Get(2048)
		if len(*b) != 2048 || cap(*b) < 2048 {
			t.Fatalf("Get(2048) after Put(cap 3000): len %d cap %d", len(*b), cap(*b))
		}
	}
	small := make([]byte, 100)
	p.Put(&small) // below the tiers: dropped, not a panic
}
