package backend

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"time"
)

// maxTokenBytes bounds a bearer token file (a Kubernetes service account
// token is about 1 KiB).
const maxTokenBytes = 64 << 10

// tokenRecheck is how often the token file is looked at (a var for tests).
var tokenRecheck = time.Second

// tokenFile is a bearer token kept in a file that rotates (a projected
// service account token, a mounted Secret). It is re-read when the file's
// size or modification time changes, checked at most once a second. The
// token is never logged or put in an error text.
type tokenFile struct {
	path string

	mu      sync.Mutex
	checked time.Time
	size    int64
	modTime time.Time
	token   string
}

func newTokenFile(path string) *tokenFile { return &tokenFile{path: path} }

// get returns the current token.
func (t *tokenFile) get() (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if t.token != "" && now.Sub(t.checked) < tokenRecheck {
		return t.token, nil
	}
	fi, err := os.Stat(t.path)
	if err != nil {
		return "", fmt.Errorf("bearer token file %s: %w", t.path, err)
	}
	t.checked = now
	if t.token != "" && fi.Size() == t.size && fi.ModTime().Equal(t.modTime) {
		return t.token, nil
	}
	if fi.Size() > maxTokenBytes {
		return "", fmt.Errorf("bearer token file %s: larger than %d bytes", t.path, maxTokenBytes)
	}
	data, err := os.ReadFile(t.path)
	if err != nil {
		return "", fmt.Errorf("bearer token file %s: %w", t.path, err)
	}
	tok := string(bytes.TrimSpace(data))
	if tok == "" {
		return "", fmt.Errorf("bearer token file %s is empty", t.path)
	}
	t.token, t.size, t.modTime = tok, fi.Size(), fi.ModTime()
	return tok, nil
}

// BearerToken returns the token to send as "Authorization: Bearer …"
// to this server, "" when it has none. The error never holds the token.
func (c *Client) BearerToken() (string, error) {
	if c.token == nil {
		return "", nil
	}
	return c.token.get()
}
