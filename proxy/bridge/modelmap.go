package bridge

import (
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// mapState is the model map in force and the backend clients of its
// servers. A reload builds the new servers' clients first and then
// publishes map and clients as one session.Mapping, so an exchange never
// sees a server it cannot reach; exchanges in flight keep the Mapping
// they started with.
type mapState struct {
	opts    Options
	metrics func() backend.Config
	obs     *observe.Metrics

	mu      sync.Mutex // serializes apply
	clients map[string]serverClient
	current atomic.Pointer[session.Mapping]
	watcher *modelmap.Watcher
}

// serverClient is one server's client and the map entry it was built
// from: a reload keeps the client (and its metadata cache) while the
// entry is unchanged, and starts a fresh one when the URL, kind or token
// file changed, which is what makes that server's cached metadata stale.
// The cache holds only what a server publishes, keyed by v2 model name:
// renames, labels and explicit metadata are applied per request, so a
// new map never makes an unchanged server's entries wrong.
type serverClient struct {
	server modelmap.Server
	client *backend.Client
}

// apply installs m.
func (s *mapState) apply(m *modelmap.Map) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	clients := make(map[string]serverClient, len(m.Servers))
	mp := &session.Mapping{Map: m, Backends: map[string]session.Backend{}, URLs: map[string]*url.URL{}}
	for name, srv := range m.Servers {
		sc, ok := s.clients[name]
		if !ok || sc.server != *srv {
			cfg := s.metrics()
			cfg.BaseURL, cfg.Kind, cfg.BearerTokenFile = srv.URL, srv.Kind, srv.BearerTokenFile
			if srv.TFServing() {
				// Only its URL and bearer token are used: its exchanges
				// pass through (session.forward), with no control call.
				cfg.Kind = backend.KindAuto
			}
			cfg.Server = name // metrics and logs name the server
			c, err := backend.New(cfg)
			if err != nil {
				return fmt.Errorf("server %q: %w", name, err)
			}
			sc = serverClient{server: *srv, client: c}
		}
		clients[name] = sc
		mp.Backends[name] = sc.client
		mp.URLs[name] = sc.client.BaseURL()
	}
	s.clients = clients
	for _, mm := range m.Models {
		if mm.Split != nil {
			// Every share's series exists from the map on, at 0: rate()
			// and ratios by server work before the first exchange.
			for _, srv := range mm.Split.Servers() {
				s.obs.SplitDeclared(mm.Name, srv)
			}
		}
	}
	s.current.Store(mp)
	return nil
}

// mapping returns the Mapping in force (nil before the first apply).
func (s *mapState) mapping() *session.Mapping { return s.current.Load() }

// newMapState loads o.ModelMapFile (nil state without one); a bad file
// is the error.
func newMapState(o Options, clientConfig func() backend.Config, m *observe.Metrics) (*mapState, error) {
	if o.ModelMapFile == "" {
		return nil, nil
	}
	s := &mapState{opts: o, metrics: clientConfig, obs: m}
	mm := m.ModelMap()
	w, err := modelmap.NewWatcher(modelmap.WatcherConfig{
		Path:     o.ModelMapFile,
		Interval: o.ModelMapPollInterval,
		Logger:   o.Logger,
		Apply:    s.apply,
		Count:    mm.Reload,
		Report: func(st modelmap.Status) {
			mm.State(st.SHA256, st.LoadedAt, st.Failing())
		},
	})
	if err != nil {
		return nil, fmt.Errorf("model map: %w", err)
	}
	s.watcher = w
	return s, nil
}

// ModelMapStatus returns the state of the model map (which map is in
// force, whether the file fails to load); ok is false without a map.
func (b *Bridge) ModelMapStatus() (st modelmap.Status, ok bool) {
	if b.maps == nil {
		return modelmap.Status{}, false
	}
	return b.maps.watcher.Status(), true
}

// ModelMapAttr describes the model map in force for a start line:
// model_map.file, .models, .servers and .sha256, or model_map=none.
func (b *Bridge) ModelMapAttr() slog.Attr {
	if b.maps == nil {
		return slog.String("model_map", "none")
	}
	st, _ := b.ModelMapStatus()
	return slog.Group("model_map", "file", st.Path, "models", st.Models, "servers", st.Servers, "sha256", st.SHA256)
}
