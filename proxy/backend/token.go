package backend

import (
	"bytes"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/fileread"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
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
//
// Requests never wait for the file: the token in force is an atomic
// value, one caller at a time re-checks the file (the others keep using
// the current token meanwhile), and the read itself cannot block
// (fileread refuses FIFOs and devices and bounds the size). A file that
// turns bad — missing, empty, too large, not a regular file — keeps the
// last good token in use; the failure is logged and counted once per
// distinct problem, not once per check.
type tokenFile struct {
	path   string
	server string
	log    *slog.Logger
	m      *observe.Metrics

	cur      atomic.Pointer[tokenState]
	checking atomic.Bool
}

// tokenState is one look at the file: the token in force (the last good
// one) and the file's stamp, or why it could not be used.
type tokenState struct {
	token   string
	size    int64
	modTime time.Time
	checked time.Time
	err     error  // the last check's failure, nil when the token is current
	errText string // err's text, to log a problem once
}

func newTokenFile(path, server string, log *slog.Logger, m *observe.Metrics) *tokenFile {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &tokenFile{path: path, server: server, log: log, m: m}
}

// get returns the current token, or an error when no good token was ever
// read.
func (t *tokenFile) get() (string, error) {
	st := t.cur.Load()
	if st != nil && time.Since(st.checked) < tokenRecheck {
		return st.result()
	}
	if !t.checking.CompareAndSwap(false, true) {
		// Another request is looking at the file: use what we have.
		if st != nil {
			return st.result()
		}
		// Nothing read yet: read for ourselves (never blocks), without
		// publishing, so the first requests need not queue either.
		return t.read(nil).result()
	}
	defer t.checking.Store(false)
	next := t.read(st)
	t.cur.Store(next)
	return next.result()
}

// result is the token to send: the last good one even when the last
// check failed.
func (s *tokenState) result() (string, error) {
	if s.token != "" {
		return s.token, nil
	}
	return "", s.err
}

// read looks at the file once and returns the state that follows prev
// (nil: nothing read yet).
func (t *tokenFile) read(prev *tokenState) *tokenState {
	now := time.Now()
	next := &tokenState{checked: now}
	if prev != nil {
		next.token, next.size, next.modTime = prev.token, prev.size, prev.modTime
	}
	fi, err := fileread.Stat(t.path)
	if err == nil && prev != nil && prev.err == nil && prev.token != "" &&
		fi.Size() == prev.size && fi.ModTime().Equal(prev.modTime) {
		return next // unchanged
	}
	var tok string
	if err == nil {
		var data []byte
		data, err = fileread.Read(t.path, maxTokenBytes)
		tok = string(bytes.TrimSpace(data))
		if err == nil && tok == "" {
			err = fmt.Errorf("%s is empty", t.path)
		}
	}
	if err != nil {
		next.err = fmt.Errorf("bearer token file: %w", err) // err names the path
		next.errText = next.err.Error()
		if prev == nil || prev.errText != next.errText {
			t.m.FileReload(observe.FileBearerToken, observe.ReloadFailure)
			if next.token != "" {
				t.log.Warn("bearer token file unusable: still sending the last good token", "server", t.server, "error", next.err)
			} else {
				t.log.Warn("bearer token file unusable", "server", t.server, "error", next.err)
			}
		}
		return next
	}
	if prev != nil {
		t.m.FileReload(observe.FileBearerToken, observe.ReloadSuccess)
		if prev.err != nil || prev.token != tok {
			t.log.Info("bearer token file re-read", "server", t.server)
		}
	}
	next.token, next.size, next.modTime = tok, fi.Size(), fi.ModTime()
	return next
}

// BearerToken returns the token to send as "Authorization: Bearer …"
// to this server, "" when it has none. The error never holds the token.
func (c *Client) BearerToken() (string, error) {
	if c.token == nil {
		return "", nil
	}
	return c.token.get()
}
