package bridge

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
)

// unixScheme prefixes a Unix domain socket address, as gRPC names them:
// "unix:///run/tfsbridge/extproc.sock" (absolute) or "unix:relative.sock".
const unixScheme = "unix:"

// socketMode is the mode of a socket tfsbridge creates. Connecting needs
// write permission on the socket; the directory holding it (in the
// sidecar layout, an emptyDir only the pod's containers mount) is what
// keeps other users out, and Envoy usually runs as another user.
const socketMode = 0o666

// SplitAddr returns the network and address of a listen address:
// ("unix", path) for "unix:///path" and "unix:path", ("tcp", addr) for
// anything else.
func SplitAddr(addr string) (network, address string, err error) {
	rest, ok := strings.CutPrefix(addr, unixScheme)
	if !ok {
		return "tcp", addr, nil
	}
	if p, ok := strings.CutPrefix(rest, "//"); ok {
		// unix://host/path has no meaning for a local socket: only an
		// empty host (unix:///path) is accepted.
		if !strings.HasPrefix(p, "/") {
			return "", "", fmt.Errorf("address %q: want unix:///absolute/path or unix:relative/path", addr)
		}
		rest = p
	}
	if rest == "" {
		return "", "", fmt.Errorf("address %q: empty socket path", addr)
	}
	return "unix", rest, nil
}

// listen binds addr, TCP or a Unix domain socket. A socket file left by a
// previous run (a crash does not unlink it) is removed first; any other
// file at the path is an error, never deleted.
func listen(addr string) (net.Listener, error) {
	network, address, err := SplitAddr(addr)
	if err != nil {
		return nil, err
	}
	if network != "unix" {
		return net.Listen(network, address)
	}
	if fi, err := os.Lstat(address); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("listen unix %s: the path exists and is not a socket", address)
		}
		if err := os.Remove(address); err != nil {
			return nil, fmt.Errorf("listen unix %s: removing the stale socket: %w", address, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listen unix %s: %w", address, err)
	}
	lis, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(address, socketMode); err != nil {
		_ = lis.Close()
		return nil, fmt.Errorf("listen unix %s: %w", address, err)
	}
	return lis, nil
}
