package modelmap

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestParseShadow(t *testing.T) {
	for _, tc := range []struct {
		name, block string
		want        *Shadow
	}{
		{"full", "{server: onnx, sample: 0.25, max_inflight: 3, tolerance: {abs: 1e-6, rel: 0.001}, mismatch_log: /tmp/m.jsonl}",
			&Shadow{Server: "onnx", Sample: 0.25, MaxInflight: 3, Abs: 1e-6, Rel: 0.001, MismatchLog: "/tmp/m.jsonl"}},
		{"defaults", "{server: onnx}",
			&Shadow{Server: "onnx", Sample: DefaultShadowSample, MaxInflight: DefaultShadowMaxInflight, Abs: DefaultShadowAbs, Rel: DefaultShadowRel}},
		{"the default server, every request, integer sample", "{server: default, sample: 1, tolerance: {rel: 0}}",
			&Shadow{Server: "default", Sample: 1, MaxInflight: DefaultShadowMaxInflight, Abs: DefaultShadowAbs, Rel: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := "servers:\n  onnx: {url: \"http://onnx:8000\"}\nmodels:\n  m:\n    shadow: " + tc.block + "\n"
			m, err := Parse([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Model("m").Shadow; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("shadow = %+v, want %+v", got, tc.want)
			}
		})
	}
	m, err := Parse([]byte("models:\n  m: {}\n"))
	if err != nil || m.Model("m").Shadow != nil {
		t.Errorf("no block: shadow = %+v, %v", m.Model("m").Shadow, err)
	}
}

func TestParseShadowErrors(t *testing.T) {
	for _, tc := range []struct {
		name, block string
		line        int
		want        string
	}{
		{"no server", "\n      sample: 0.5\n", 5, `models.m.shadow: shadow has no server`},
		{"unknown server", "\n      server: tf\n", 6, `models.m.shadow.server: uses server "tf", which servers does not define`},
		{"sample over 1", "\n      server: onnx\n      sample: 1.5\n", 7, `models.m.shadow.sample: sample 1.5: want a share between 0 and 1`},
		{"negative sample", "{server: onnx, sample: -0.1}", 5, `models.m.shadow.sample: sample -0.1: want a share between 0 and 1`},
		{"NaN sample", "{server: onnx, sample: .nan}", 5, `models.m.shadow.sample: sample NaN`},
		{"sample a string", "{server: onnx, sample: lots}", 5, `models.m.shadow.sample: want a number, not "lots"`},
		{"max_inflight 0", "\n      server: onnx\n      max_inflight: 0\n", 7, `models.m.shadow.max_inflight: max_inflight 0: want 1 to 10000`},
		{"max_inflight fraction", "{server: onnx, max_inflight: 2.5}", 5, `models.m.shadow.max_inflight: want an integer, not "2.5"`},
		{"negative tolerance", "\n      server: onnx\n      tolerance:\n        rel: -1e-4\n", 8, `models.m.shadow.tolerance.rel: rel -0.0001: want a finite number ≥ 0`},
		{"infinite tolerance", "{server: onnx, tolerance: {abs: .inf}}", 5, `models.m.shadow.tolerance.abs: abs +Inf: want a finite number ≥ 0`},
		{"tolerance unknown key", "{server: onnx, tolerance: {relative: 1}}", 5, `models.m.shadow.tolerance: unknown key "relative" (want abs, rel)`},
		{"empty mismatch_log", "\n      server: onnx\n      mismatch_log: \"\"\n", 7, `models.m.shadow.mismatch_log: mismatch_log is empty`},
		{"unknown key", "{server: onnx, rate: 5}", 5, `models.m.shadow: unknown key "rate" (want server, sample, max_inflight, tolerance, mismatch_log)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := "servers:\n  onnx: {url: \"http://onnx:8000\"}\nmodels:\n  m:\n    shadow: " + tc.block + "\n"
			_, err := Parse([]byte(doc))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			want := fmt.Sprintf("line %d: %s", tc.line, tc.want)
			if e.Line != tc.line || !strings.HasPrefix(e.Error(), want) {
				t.Errorf("err = %q (line %d)\nwant %q", e.Error(), e.Line, want)
			}
		})
	}
}
