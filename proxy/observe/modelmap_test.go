package observe

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestModelMapMetrics: the info series follows the map in force (one
// series, the old one removed), failing follows the file, and the success
// time is the load's.
func TestModelMapMetrics(t *testing.T) {
	var none *Metrics
	none.ModelMap().Reload("failure") // nil-safe
	none.ModelMap().State("aa", time.Now(), true)

	m := NewMetrics()
	mm := m.ModelMap()
	at := time.Unix(1700000000, 500_000_000)
	// series returns every model map series as "name{label=value}" → value.
	series := func() map[string]float64 {
		families, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, f := range families {
			for _, s := range f.GetMetric() {
				name := f.GetName()
				for _, l := range s.GetLabel() {
					name += "{" + l.GetName() + "=" + l.GetValue() + "}"
				}
				if strings.HasPrefix(name, "tfsbridge_model_map_") {
					out[name] = s.GetCounter().GetValue() + s.GetGauge().GetValue()
				}
			}
		}
		return out
	}
	for _, st := range []struct {
		name string
		do   func()
		want map[string]float64
	}{
		{"loaded", func() { mm.State("aa", at, false) }, map[string]float64{
			"tfsbridge_model_map_info{sha256=aa}":                       1,
			"tfsbridge_model_map_last_reload_success_timestamp_seconds": 1700000000.5,
			"tfsbridge_model_map_reload_failing":                        0,
			"tfsbridge_model_map_reloads_total{result=failure}":         0,
			"tfsbridge_model_map_reloads_total{result=success}":         0,
		}},
		{"a bad file", func() { mm.Reload("failure"); mm.State("aa", at, true) }, map[string]float64{
			"tfsbridge_model_map_info{sha256=aa}":                       1,
			"tfsbridge_model_map_last_reload_success_timestamp_seconds": 1700000000.5,
			"tfsbridge_model_map_reload_failing":                        1,
			"tfsbridge_model_map_reloads_total{result=failure}":         1,
			"tfsbridge_model_map_reloads_total{result=success}":         0,
		}},
		{"a new map", func() { mm.Reload("success"); mm.State("bb", at.Add(time.Minute), false) }, map[string]float64{
			"tfsbridge_model_map_info{sha256=bb}":                       1,
			"tfsbridge_model_map_last_reload_success_timestamp_seconds": 1700000060.5,
			"tfsbridge_model_map_reload_failing":                        0,
			"tfsbridge_model_map_reloads_total{result=failure}":         1,
			"tfsbridge_model_map_reloads_total{result=success}":         1,
		}},
	} {
		st.do()
		if got := series(); !reflect.DeepEqual(got, st.want) {
			t.Errorf("%s: series %v\nwant %v", st.name, got, st.want)
		}
	}
}
