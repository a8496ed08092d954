package envoysim

import (
	"fmt"
	"net/url"
	"strings"
)

// HeaderRoute is a route placed before the default one: a request whose
// header Header has exactly the value Value goes to the cluster at
// Upstream (what an Envoy route with a headers matcher on
// x-tfsbridge-server does).
type HeaderRoute struct {
	Header, Value, Upstream string
}

// route is a HeaderRoute ready for matching.
type route struct {
	header, value string
	upstream      *url.URL
}

func parseRoutes(rs []HeaderRoute) ([]route, error) {
	out := make([]route, 0, len(rs))
	for _, r := range rs {
		u, err := url.Parse(r.Upstream)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("envoysim: route upstream %q: want http://host:port", r.Upstream)
		}
		out = append(out, route{header: strings.ToLower(r.Header), value: r.Value, upstream: &url.URL{Scheme: u.Scheme, Host: u.Host}})
	}
	return out, nil
}

// routed returns the cluster the route cache holds, def when none was
// picked (a stream that never saw request headers).
func (f *filter) routed(def *url.URL) *url.URL {
	if f.upstream == nil {
		return def
	}
	return f.upstream
}

// pickRoute is Envoy's route match: the first header route whose header
// matches, else the default upstream. Envoy evaluates it once from the
// request headers and again only when a processor clears the route cache.
func (e *Envoy) pickRoute(h *headerMap) *url.URL {
	if h == nil {
		return e.upstream
	}
	for _, r := range e.routes {
		if v, ok := h.get(r.header); ok && v == r.value {
			return r.upstream
		}
	}
	return e.upstream
}
