// Package buildinfo tells which build of tfsbridge is running: the module
// version and the VCS revision the Go toolchain stamped into the binary,
// unless the release build overrode them at link time:
//
//	go build -ldflags "-X github.com/tfsbridge/tfsbridge/internal/buildinfo.version=0.1.0 \
//	  -X github.com/tfsbridge/tfsbridge/internal/buildinfo.revision=$(git rev-parse HEAD)" ./cmd/tfsbridge
//
// Link-time values win because release images are built with -buildvcs=false
// (no .git in the Docker build context) and without a module version.
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// Set with -ldflags -X; empty means "ask debug.ReadBuildInfo".
var (
	version  string
	revision string
)

// Unknown stands for a value neither the linker nor the toolchain provided.
const Unknown = "unknown"

// Info describes one build.
type Info struct {
	// Version is the release ("0.1.0"), the module version when built with
	// go install module@version, or "(devel)" for a build from a checkout.
	Version string
	// Revision is the VCS commit the binary was built from.
	Revision string
	// Modified reports a build from a work tree with uncommitted changes.
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Get returns the running binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(bi, version, revision)
}

// resolve merges link-time values over what the toolchain recorded; bi may
// be nil (a binary built without module support).
func resolve(bi *debug.BuildInfo, linkVersion, linkRevision string) Info {
	info := Info{Version: Unknown, Revision: Unknown, GoVersion: Unknown}
	if bi != nil {
		info.GoVersion = bi.GoVersion
		if bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if linkVersion != "" {
		info.Version = linkVersion
	}
	if linkRevision != "" {
		info.Revision = linkRevision
		info.Modified = false
	}
	return info
}

// String is the one line "tfsbridge version" prints, e.g.
// "tfsbridge 0.1.0 (revision 3f2c1d0, go1.26.8)".
func (i Info) String() string {
	rev := i.Revision
	if i.Modified {
		rev += "-dirty"
	}
	return fmt.Sprintf("tfsbridge %s (revision %s, %s)", i.Version, rev, i.GoVersion)
}
