package backend

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

func TestBearerTokenFile(t *testing.T) {
	old := tokenRecheck
	tokenRecheck = 0
	t.Cleanup(func() { tokenRecheck = old })

	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "token")
	write := func(tok string) {
		if err := os.WriteFile(path, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first-secret\n")
	c, err := New(Config{BaseURL: srv.URL, Kind: "triton", BearerTokenFile: path})
	if err != nil {
		t.Fatal(err)
	}
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		return seen[len(seen)-1]
	}
	for _, tc := range []struct {
		token string // "" removes the file
		want  string
	}{
		{"first-secret\n", "Bearer first-secret"},
		{"rotated-secret-2", "Bearer rotated-secret-2"},
		{"", ""},
	} {
		if tc.token == "" {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		} else {
			write(tc.token)
		}
		err := c.Health(context.Background())
		if tc.want == "" {
			e := apierr.As(err)
			if err == nil || e.Code != apierr.Unavailable || strings.Contains(err.Error(), "secret") {
				t.Errorf("missing token file: %v", err)
			}
			continue
		}
		if err != nil || last() != tc.want {
			t.Errorf("token %q: err %v, sent %q", tc.token, err, last())
		}
	}
	// Without a token file nothing is sent.
	plain, err := New(Config{BaseURL: srv.URL, Kind: "triton"})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Health(context.Background()); err != nil || last() != "" {
		t.Errorf("no token file: err %v, sent %q", err, last())
	}
}
