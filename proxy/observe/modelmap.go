package observe

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ModelMapMetrics are the series of the --model-map file: reloads by
// result, which map is in force, and whether the file on disk fails to
// load. The counter alone cannot drive an alert that stays firing while
// a file stays broken (a bad file is counted once), the failing gauge
// can.
type ModelMapMetrics struct {
	reloads     *prometheus.CounterVec
	info        *prometheus.GaugeVec
	failing     prometheus.Gauge
	lastSuccess prometheus.Gauge

	mu  sync.Mutex
	sum string // the sha256 label of the info series set now
}

// ModelMap registers the model map's series on m's registry:
//
//   - tfsbridge_model_map_reloads_total{result}: success or failure,
//     both series present from the start;
//   - tfsbridge_model_map_info{sha256}: 1 for the map in force;
//   - tfsbridge_model_map_reload_failing: 1 while the file on disk is
//     not the map in force and cannot be loaded (bad YAML, a rejected
//     map, an unreadable or non-regular file), 0 otherwise;
//   - tfsbridge_model_map_last_reload_success_timestamp_seconds: when
//     the map in force was loaded.
//
// Call it only when a map is configured. Nil-safe: a nil m gives a
// *ModelMapMetrics that records nothing.
func (m *Metrics) ModelMap() *ModelMapMetrics {
	if m == nil {
		return nil
	}
	mm := &ModelMapMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfsbridge_model_map_reloads_total",
			Help: "Re-reads of the --model-map file after it changed, by result (success: the new map is in force; failure: the previous map stays). A file that stays bad is counted once.",
		}, []string{"result"}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tfsbridge_model_map_info",
			Help: "1 for the model map in force, labelled with the SHA-256 of its file's content (sha256sum FILE).",
		}, []string{"sha256"}),
		failing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tfsbridge_model_map_reload_failing",
			Help: "1 while the --model-map file on disk differs from the map in force and cannot be loaded (the previous map stays), 0 otherwise.",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tfsbridge_model_map_last_reload_success_timestamp_seconds",
			Help: "Unix time at which the model map in force was loaded (at startup or by a reload).",
		}),
	}
	m.Registry.MustRegister(mm.reloads, mm.info, mm.failing, mm.lastSuccess)
	for _, r := range []string{"success", "failure"} {
		mm.reloads.WithLabelValues(r)
	}
	return mm
}

// Reload counts one reload by result ("success" or "failure").
func (mm *ModelMapMetrics) Reload(result string) {
	if mm != nil {
		mm.reloads.WithLabelValues(result).Inc()
	}
}

// State records the map in force (the hex SHA-256 of its file, when it
// was loaded) and whether the file on disk fails to load.
func (mm *ModelMapMetrics) State(sha256 string, loadedAt time.Time, failing bool) {
	if mm == nil {
		return
	}
	mm.mu.Lock()
	defer mm.mu.Unlock()
	if sha256 != mm.sum {
		if mm.sum != "" {
			mm.info.DeleteLabelValues(mm.sum)
		}
		mm.info.WithLabelValues(sha256).Set(1)
		mm.sum = sha256
	}
	mm.lastSuccess.Set(float64(loadedAt.UnixNano()) / 1e9)
	if failing {
		mm.failing.Set(1)
	} else {
		mm.failing.Set(0)
	}
}
