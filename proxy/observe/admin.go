package observe

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyTimeout bounds one readiness check so a hung backend cannot hang
// the kubelet's probe.
const readyTimeout = 2 * time.Second

// AdminHandler serves the admin endpoints:
//   - /metrics: Prometheus exposition of m's registry;
//   - /healthz: 200 while the process is up (liveness: restarting us does
//     not fix a sick backend, so the backend is not consulted);
//   - /readyz: 200 when ready(ctx) returns nil, else 503 with the reason.
//     The binaries wire ready to "our listener is serving and the v2
//     server answers GET /v2/health/ready with 200": in the sidecar layout
//     a pod whose Triton is not ready should not receive traffic.
func AdminHandler(m *Metrics, ready func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	if m != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			defer cancel()
			if err := ready(ctx); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte("not ready: " + err.Error() + "\n"))
				return
			}
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}
