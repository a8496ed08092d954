// Package fakev2 is a scriptable stand-in for a v2 server's control API
// (GET /v2, model metadata, Triton config, readiness, health) for the
// proxy packages' tests. Unlike internal/mockv2 it runs no models: tests set
// the exact answers they want, count the calls made, and can make any
// path fail.
package fakev2

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Tensor is one metadata input or output.
type Tensor struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

// Model is one model the fake server knows.
type Model struct {
	Name     string
	Versions []string
	Inputs   []Tensor
	Outputs  []Tensor
	// MaxBatchSize is served by Triton's /config.
	MaxBatchSize int
	// NotReady lists versions ("" = the model itself) that are not ready.
	NotReady []string
}

// HalfPlusTwo is TF Serving's example model as a v2 server describes it
// (x FP32 [-1] → y FP32 [-1]), with the given versions ("1" when none).
func HalfPlusTwo(versions ...string) Model {
	if len(versions) == 0 {
		versions = []string{"1"}
	}
	return Model{
		Name:     "half_plus_two",
		Versions: versions,
		Inputs:   []Tensor{{Name: "x", Datatype: "FP32", Shape: []int64{-1}}},
		Outputs:  []Tensor{{Name: "y", Datatype: "FP32", Shape: []int64{-1}}},
	}
}

// Reply is a canned answer for one path.
type Reply struct {
	Status      int
	ContentType string
	Body        string
}

// Server is the fake v2 server.
type Server struct {
	*httptest.Server
	kind string

	mu       sync.Mutex
	models   map[string]*Model
	replies  map[string]Reply
	hits     map[string]int
	infer    http.HandlerFunc
	onMetaFn func()
}

// New starts a fake server of kind ("triton", "kserve", "mlserver")
// knowing models; it is closed when the test ends.
func New(t testing.TB, kind string, models ...Model) *Server {
	s := &Server{kind: kind, models: map[string]*Model{}, replies: map[string]Reply{}, hits: map[string]int{}}
	for i := range models {
		s.models[models[i].Name] = &models[i]
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Set makes path (e.g. "/v2/models/m") answer r instead of the default.
func (s *Server) Set(path string, r Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies[path] = r
}

// SetInfer handles POST …/infer.
func (s *Server) SetInfer(h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.infer = h
}

// OnMetadata runs f (e.g. a sleep) before each metadata answer.
func (s *Server) OnMetadata(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onMetaFn = f
}

// Hits returns how many requests reached path.
func (s *Server) Hits(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	s.mu.Lock()
	s.hits[path]++
	reply, canned := s.replies[path]
	infer := s.infer
	onMeta := s.onMetaFn
	s.mu.Unlock()
	if canned {
		if reply.ContentType != "" {
			w.Header().Set("Content-Type", reply.ContentType)
		}
		w.WriteHeader(reply.Status)
		_, _ = w.Write([]byte(reply.Body))
		return
	}
	switch {
	case path == "/v2":
		writeJSON(w, 200, map[string]any{"name": s.kind, "version": "1.0", "extensions": []string{}})
		return
	case path == "/v2/health/ready" || path == "/v2/health/live":
		w.WriteHeader(200)
		return
	case strings.HasPrefix(path, "/v2/models/"):
	default:
		writeJSON(w, 404, map[string]string{"error": "Not Found"})
		return
	}
	rest := strings.TrimPrefix(path, "/v2/models/")
	parts := strings.Split(rest, "/")
	name, version, tail := parts[0], "", parts[1:]
	if len(tail) >= 2 && tail[0] == "versions" {
		version, tail = tail[1], tail[2:]
	}
	s.mu.Lock()
	m := s.models[name]
	s.mu.Unlock()
	if m == nil || (version != "" && !contains(m.Versions, version)) {
		msg := fmt.Sprintf("Request for unknown model: '%s' is not found", name)
		if m != nil {
			msg = fmt.Sprintf("Request for unknown model: '%s' version %s is not found", name, version)
		}
		writeJSON(w, 404, map[string]string{"error": msg})
		return
	}
	switch {
	case len(tail) == 0 && r.Method == http.MethodGet:
		if onMeta != nil {
			onMeta()
		}
		writeJSON(w, 200, map[string]any{"name": m.Name, "versions": m.Versions, "platform": "fake",
			"inputs": m.Inputs, "outputs": m.Outputs})
	case len(tail) == 1 && tail[0] == "config":
		writeJSON(w, 200, map[string]any{"name": m.Name, "max_batch_size": m.MaxBatchSize})
	case len(tail) == 1 && tail[0] == "ready":
		if contains(m.NotReady, version) {
			writeJSON(w, 400, map[string]string{"error": "Model version not ready"})
			return
		}
		w.WriteHeader(200)
	case len(tail) == 1 && tail[0] == "infer" && r.Method == http.MethodPost && infer != nil:
		infer(w, r)
	default:
		writeJSON(w, 404, map[string]string{"error": "Not Found"})
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
