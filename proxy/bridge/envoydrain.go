package bridge

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// envoyDrainTimeout bounds the call to Envoy's admin.
const envoyDrainTimeout = 2 * time.Second

// drainEnvoy asks the sidecar Envoy at admin (its admin base URL) to drain
// its listeners gracefully: from now on it closes downstream connections
// after their current request and, after its --drain-time-s, stops
// listening. tfsbridge does this on SIGTERM because the Envoy images
// worth running (distroless) have no shell or curl for a preStop hook to
// POST with, and the two share the pod's loopback.
func drainEnvoy(ctx context.Context, client *http.Client, admin string) error {
	ctx, cancel := context.WithTimeout(ctx, envoyDrainTimeout)
	defer cancel()
	u := strings.TrimSuffix(admin, "/") + "/drain_listeners?graceful"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s answered %d", u, resp.StatusCode)
	}
	return nil
}

// validAdminURL accepts "" (no Envoy to drain) or an http(s)://host URL.
func validAdminURL(s string) bool {
	if s == "" {
		return true
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
