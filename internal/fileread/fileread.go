// Package fileread reads the small files tfsbridge depends on at run time
// (the model map, bearer-token files, TLS certificates and keys, CA
// bundles) so that no file can block the process or exhaust its memory.
//
// A plain os.ReadFile is unsafe for files an operator (or an attacker with
// write access to a mounted volume) can swap: opening a FIFO with no writer
// blocks forever, and a character device such as /dev/zero never ends.
// Read therefore opens without blocking, refuses anything that is not a
// regular file once symlinks are followed (Kubernetes mounts ConfigMaps and
// Secrets through symlinks, which must keep working), and stops at a hard
// size limit.
package fileread

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrNotRegular is returned for a path that is not a regular file after
// symlinks are followed: a FIFO, a device, a socket or a directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned when a file holds more than the limit.
var ErrTooLarge = errors.New("file too large")

// Read returns the contents of the regular file at path, or an error if it
// is not a regular file or holds more than limit bytes. It never blocks on
// a FIFO and never reads more than limit+1 bytes.
func Read(path string, limit int64) ([]byte, error) {
	// O_NONBLOCK makes open(2) of a FIFO without a writer return at once;
	// on a regular file it has no effect.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kind(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s: %w: %d bytes, the limit is %d", path, ErrTooLarge, fi.Size(), limit)
	}
	// The size from Stat can be stale (a file still being written), so the
	// read itself is bounded too.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", path, ErrTooLarge, limit)
	}
	return data, nil
}

// Stat returns the FileInfo of path after following symlinks, refusing
// anything but a regular file, without opening it: for watchers that poll
// a file's size and modification time.
func Stat(path string) (os.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kind(fi.Mode()))
	}
	return fi, nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	default:
		return "type " + m.Type().String()
	}
}
