package backend

import (
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/route"
)

func TestCallKind(t *testing.T) {
	r := route.Route{Model: "m", Version: 3, HasVersion: true}
	for path, want := range map[string]string{
		"/v2":                                    "server",
		"/v2/health/ready":                       "ready",
		r.V2ReadyPath():                          "ready",
		r.V2ConfigPath():                         "config",
		r.V2ModelPath():                          "metadata",
		"/v2/models/ready":                       "metadata", // a model named "ready"
		"/v2/models/config/versions/2":           "metadata",
		"/v2/models/config/ready":                "ready",
		"/v2/models/a%2Fready/versions/1/config": "config",
	} {
		if got := callKind(path); got != want {
			t.Errorf("callKind(%q) = %q, want %q", path, got, want)
		}
	}
}
