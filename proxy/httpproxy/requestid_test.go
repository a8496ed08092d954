package httpproxy

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWithRequestID(t *testing.T) {
	tests := []struct {
		name, sent, upstream string
		write                func(w http.ResponseWriter)
		keep                 bool // the sent id is kept
	}{
		{"client id, implicit 200", "client-1", "", func(w http.ResponseWriter) { _, _ = w.Write([]byte("x")) }, true},
		{"no id, 404", "", "", func(w http.ResponseWriter) { w.WriteHeader(http.StatusNotFound) }, false},
		{"insane id replaced", "a b", "", func(w http.ResponseWriter) { w.WriteHeader(http.StatusOK) }, false},
		{"upstream id overridden", "client-2", "upstream-id", func(w http.ResponseWriter) { w.WriteHeader(http.StatusOK) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen string
			h := WithRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = r.Header.Get("X-Request-Id")
				if tt.upstream != "" {
					w.Header().Add("X-Request-Id", tt.upstream)
				}
				tt.write(w)
			}))
			r := httptest.NewRequest(http.MethodGet, "/v1/models/m", nil)
			if tt.sent != "" {
				r.Header.Set("X-Request-Id", tt.sent)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			got := w.Result().Header.Values("X-Request-Id")
			if len(got) != 1 || got[0] != seen || seen == "" {
				t.Fatalf("answer x-request-id %q, request saw %q; want one, the same", got, seen)
			}
			if tt.keep != (seen == tt.sent) || (!tt.keep && len(seen) != 36) {
				t.Errorf("id %q for sent %q (keep %v)", seen, tt.sent, tt.keep)
			}
		})
	}
}
