package fileread

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "token")
	if err := os.WriteFile(regular, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 65), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	fifoLink := filepath.Join(dir, "fifo-link")
	if err := os.Symlink(fifo, fifoLink); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		path string
		want string
		err  error
	}{
		{"regular", regular, "secret\n", nil},
		{"symlink to regular", link, "secret\n", nil},
		{"exactly at the limit", big, string(make([]byte, 65)), nil},
		{"directory", dir, "", ErrNotRegular},
		{"fifo without writer", fifo, "", ErrNotRegular},
		{"symlink to fifo", fifoLink, "", ErrNotRegular},
		{"character device that never ends", "/dev/zero", "", ErrNotRegular},
		{"missing", filepath.Join(dir, "nope"), "", os.ErrNotExist},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A blocking open would hang here, so the read runs under a
			// deadline far above what a non-blocking open takes even on a
			// loaded machine.
			type result struct {
				data []byte
				err  error
			}
			done := make(chan result, 1)
			go func() {
				d, err := Read(c.path, 65)
				done <- result{d, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Read blocked")
			}
			if c.err != nil {
				if !errors.Is(r.err, c.err) {
					t.Fatalf("err = %v, want %v", r.err, c.err)
				}
				return
			}
			if r.err != nil || string(r.data) != c.want {
				t.Fatalf("Read = %q, %v; want %q", r.data, r.err, c.want)
			}
		})
	}

	if _, err := Read(big, 64); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: err = %v, want ErrTooLarge", err)
	}
	if _, err := Stat(fifo); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("Stat(fifo) = %v, want ErrNotRegular", err)
	}
	if fi, err := Stat(link); err != nil || fi.Size() != 7 {
		t.Fatalf("Stat(link) = %v, %v", fi, err)
	}
}
