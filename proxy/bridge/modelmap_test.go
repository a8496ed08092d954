package bridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// TestModelMapServers checks what a reload does to the servers' clients:
// an unchanged server keeps its client (and metadata cache), a changed
// one gets a fresh client, a removed one is gone, and a map whose server
// cannot be set up is refused whole.
func TestModelMapServers(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "map.yaml")
	write := func(doc string) {
		if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("servers:\n  a: {url: \"http://a:1\"}\n  b: {url: \"http://b:1\", kind: kserve}\nmodels:\n  m: {server: a}\n")
	o := DefaultOptions()
	o.ModelMapFile = file
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	mapping := func() *session.Mapping { return b.Session.Mapping() }
	first := mapping()
	if first == nil || first.Map.ServerOf("m") != "a" || first.URLs["b"].String() != "http://b:1" {
		t.Fatalf("first mapping = %+v", first)
	}
	steps := []struct {
		doc              string
		reloaded         bool
		sameA, hasB      bool
		failures, models int
	}{
		{"servers:\n  a: {url: \"http://a:1\"}\n  b: {url: \"http://b:2\"}\nmodels:\n  m: {server: a}\n  n: {server: b}\n", true, true, true, 0, 2},
		{"servers:\n  a: {url: \"http://a:9\"}\nmodels:\n  m: {server: a}\n", true, false, false, 0, 1},
		{"servers:\n  a: {url: \"http://a:9\", kind: torch}\n", false, true, false, 1, 1},
	}
	prev := first
	for i, st := range steps {
		write(st.doc)
		if got := b.maps.watcher.Poll(); got != st.reloaded {
			t.Fatalf("step %d: reloaded %v, want %v (%v)", i, got, st.reloaded, b.maps.watcher.LastError())
		}
		cur := mapping()
		if (cur.Backends["a"] == prev.Backends["a"]) != st.sameA || (cur.Backends["b"] != nil) != st.hasB || len(cur.Map.Models) != st.models {
			t.Errorf("step %d: same a %v, has b %v, models %d", i, cur.Backends["a"] == prev.Backends["a"], cur.Backends["b"] != nil, len(cur.Map.Models))
		}
		if i == 0 && cur.Backends["b"] == prev.Backends["b"] {
			t.Error("a server whose URL changed kept its client")
		}
		prev = cur
	}
	if _, ok := prev.Backends["a"].(*backend.Client); !ok || prev.URLs["a"].String() != "http://a:9" {
		t.Errorf("a = %v", prev.URLs["a"])
	}
	var e *modelmap.Error
	if err := b.maps.watcher.LastError(); err == nil || !strings.Contains(err.Error(), "kind \"torch\"") {
		t.Errorf("LastError = %v (%T)", err, e)
	}

	o.ModelMapFile = filepath.Join(dir, "missing.yaml")
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "model map") {
		t.Errorf("a missing map at start: %v", err)
	}
}
