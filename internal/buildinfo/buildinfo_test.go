package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/tfsbridge/tfsbridge", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "3f2c1d0aa"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	tests := []struct {
		name       string
		bi         *debug.BuildInfo
		ver, rev   string
		want       Info
		wantString string
	}{
		{
			name:       "toolchain stamps only",
			bi:         stamped,
			want:       Info{Version: "(devel)", Revision: "3f2c1d0aa", Modified: true, GoVersion: "go1.26.8"},
			wantString: "tfsbridge (devel) (revision 3f2c1d0aa-dirty, go1.26.8)",
		},
		{
			name:       "link-time values win",
			bi:         stamped,
			ver:        "0.1.0",
			rev:        "abcdef0",
			want:       Info{Version: "0.1.0", Revision: "abcdef0", GoVersion: "go1.26.8"},
			wantString: "tfsbridge 0.1.0 (revision abcdef0, go1.26.8)",
		},
		{
			name:       "go install module@version without VCS",
			bi:         &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.0"}},
			want:       Info{Version: "v0.1.0", Revision: Unknown, GoVersion: "go1.26.8"},
			wantString: "tfsbridge v0.1.0 (revision unknown, go1.26.8)",
		},
		{
			name:       "no build info",
			ver:        "0.2.0",
			want:       Info{Version: "0.2.0", Revision: Unknown, GoVersion: Unknown},
			wantString: "tfsbridge 0.2.0 (revision unknown, unknown)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolve(tt.bi, tt.ver, tt.rev)
			if got != tt.want {
				t.Errorf("resolve = %+v, want %+v", got, tt.want)
			}
			if s := got.String(); s != tt.wantString {
				t.Errorf("String() = %q, want %q", s, tt.wantString)
			}
		})
	}
}

// TestGet checks the running test binary reports its toolchain.
func TestGet(t *testing.T) {
	if got := Get(); got.GoVersion == Unknown || got.Version == "" {
		t.Errorf("Get() = %+v: a test binary has build info", got)
	}
}
