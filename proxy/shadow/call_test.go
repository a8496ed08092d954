package shadow

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// TestPartsReader: the parts come out in order whole, through Read in
// small steps and through WriteTo, and the parts are left unchanged.
func TestPartsReader(t *testing.T) {
	tests := []struct {
		name  string
		parts []string
	}{
		{"none", nil},
		{"one", []string{"abc"}},
		{"several with empty ones", []string{"", "ab", "", "cdefg", "h", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := strings.Join(tt.parts, "")
			parts := make([][]byte, len(tt.parts))
			for i, p := range tt.parts {
				parts[i] = []byte(p)
			}
			var got bytes.Buffer
			buf := make([]byte, 2)
			r := &partsReader{parts: parts}
			for {
				n, err := r.Read(buf)
				got.Write(buf[:n])
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if got.String() != want {
				t.Errorf("Read: %q, want %q", got.String(), want)
			}
			got.Reset()
			n, err := (&partsReader{parts: parts}).WriteTo(&got)
			if err != nil || got.String() != want || n != int64(len(want)) {
				t.Errorf("WriteTo: %q, %d, %v; want %q", got.String(), n, err, want)
			}
			for i, p := range parts {
				if string(p) != tt.parts[i] {
					t.Errorf("part %d changed: %q", i, p)
				}
			}
		})
	}
}

// TestCopiesReuseConnection: copies one after another go over one
// connection: an answer of declared length is read to its end, so the
// HTTP client keeps the connection for the next copy.
func TestCopiesReuseConnection(t *testing.T) {
	var mu sync.Mutex
	conns := map[string]bool{} // client addresses of inference calls
	h := newHarness(t, Options{}, 1)
	target := v2Target(t, 0, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/infer") {
				mu.Lock()
				conns[r.RemoteAddr] = true
				mu.Unlock()
			}
			next.ServeHTTP(w, r)
		})
	})
	const n = 20
	for range n {
		c := h.copyOf(target, predictPath, predictBody, ok(primaryOK))
		h.e.run(c)
		h.e.Release(c.Reserved)
	}
	h.expect(map[string]int{observe.ShadowMatch: n})
	if len(conns) != 1 {
		t.Errorf("%d copies over %d connections, want 1", n, len(conns))
	}
}
