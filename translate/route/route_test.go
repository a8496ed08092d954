package route

import "testing"

func TestRoutePaths(t *testing.T) {
	tests := []struct {
		name     string
		r        Route
		model    string // V2ModelPath
		servable string
		str      string
	}{
		{
			name:     "latest",
			r:        Route{Verb: Predict, Model: "half_plus_two"},
			model:    "/v2/models/half_plus_two",
			servable: "Latest(half_plus_two)",
			str:      `predict "half_plus_two"`,
		},
		{
			name:     "version",
			r:        Route{Verb: Predict, Model: "foo", Version: 50, HasVersion: true},
			model:    "/v2/models/foo/versions/50",
			servable: "Specific(foo, 50)",
			str:      `predict "foo" version 50`,
		},
		{
			name:     "version zero",
			r:        Route{Verb: Status, Model: "m", Version: 0, HasVersion: true},
			model:    "/v2/models/m/versions/0",
			servable: "Specific(m, 0)",
			str:      `status "m" version 0`,
		},
		{
			name:     "label has no v2 form",
			r:        Route{Verb: Metadata, Model: "m", Label: "stable"},
			model:    "/v2/models/m",
			servable: "Latest(m)",
			str:      `metadata "m" label "stable"`,
		},
		{
			name:     "decoded bytes are escaped as one segment",
			r:        Route{Verb: Classify, Model: "a/b?c#d%e f:g"},
			model:    "/v2/models/a%2Fb%3Fc%23d%25e%20f:g",
			servable: "Latest(a/b?c#d%e f:g)",
			str:      `classify "a/b?c#d%e f:g"`,
		},
		{
			name:     "control and non-ASCII bytes",
			r:        Route{Verb: Regress, Model: "x\n\x00é", Version: 9223372036854775807, HasVersion: true},
			model:    "/v2/models/x%0A%00%C3%A9/versions/9223372036854775807",
			servable: "Specific(x\n\x00é, 9223372036854775807)",
			str:      `regress "x\n\x00é" version 9223372036854775807`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.V2ModelPath(); got != tc.model {
				t.Errorf("V2ModelPath() = %q; want %q", got, tc.model)
			}
			if got, want := tc.r.V2InferPath(), tc.model+"/infer"; got != want {
				t.Errorf("V2InferPath() = %q; want %q", got, want)
			}
			if got, want := tc.r.V2ReadyPath(), tc.model+"/ready"; got != want {
				t.Errorf("V2ReadyPath() = %q; want %q", got, want)
			}
			if got, want := tc.r.V2ConfigPath(), tc.model+"/config"; got != want {
				t.Errorf("V2ConfigPath() = %q; want %q", got, want)
			}
			if got := tc.r.Servable(); got != tc.servable {
				t.Errorf("Servable() = %q; want %q", got, tc.servable)
			}
			if got := tc.r.String(); got != tc.str {
				t.Errorf("String() = %q; want %q", got, tc.str)
			}
		})
	}
}

func TestVerbString(t *testing.T) {
	tests := []struct {
		v    Verb
		want string
	}{
		{Predict, "predict"},
		{Classify, "classify"},
		{Regress, "regress"},
		{Status, "status"},
		{Metadata, "metadata"},
		{0, "Verb(0)"},
		{Metadata + 1, "Verb(6)"},
		{255, "Verb(255)"},
	}
	for _, tc := range tests {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("Verb(%d).String() = %q; want %q", uint8(tc.v), got, tc.want)
		}
	}
}
