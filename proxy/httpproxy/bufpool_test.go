package httpproxy

import "testing"

func TestBufferPool(t *testing.T) {
	bp := newBufferPool()
	b := bp.Get()
	if len(b) != copyBufferSize {
		t.Fatalf("Get: %d bytes, want %d", len(b), copyBufferSize)
	}
	bp.Put(b[:10]) // a shortened buffer comes back whole
	if got := bp.Get(); len(got) != copyBufferSize {
		t.Errorf("Get after Put of a resliced buffer: %d bytes", len(got))
	}
	bp.Put(make([]byte, 100)) // another size is dropped
	for range 4 {
		if got := bp.Get(); len(got) != copyBufferSize {
			t.Errorf("Get after Put of a foreign buffer: %d bytes", len(got))
		}
	}
}
