package bridge

import (
	"os"
	"path/filepath"
	"testing"
)

// TestModelMapSplit: a TF Serving server gets a client (its URL and
// bearer token; nothing asks it for v2 metadata), and every share of a
// split has its tfsbridge_split_requests_total series from the map on.
func TestModelMapSplit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "map.yaml")
	doc := "servers:\n  tfs: {url: \"http://tf-serving:8501\", kind: tfserving}\nmodels:\n  m:\n    split: {tfs: 9, default: 1}\n"
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.ModelMapFile = file
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	mp := b.Session.Mapping()
	if mp == nil || mp.Backends["tfs"] == nil || mp.URLs["tfs"].String() != "http://tf-serving:8501" || !mp.Map.Server("tfs").TFServing() {
		t.Fatalf("mapping = %+v", mp)
	}
	mfs, err := b.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "tfsbridge_split_requests_total" {
			for _, m := range mf.GetMetric() {
				var labels string
				for _, lp := range m.GetLabel() {
					labels += lp.GetName() + "=" + lp.GetValue() + ","
				}
				series[labels] = m.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{"model=m,server=default,": 0, "model=m,server=tfs,": 0}
	if len(series) != len(want) || series["model=m,server=default,"] != 0 || series["model=m,server=tfs,"] != 0 {
		t.Errorf("series = %v, want %v", series, want)
	}
}
