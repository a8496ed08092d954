// Package modelmap is tfsbridge's model map: an optional YAML file that
// says how the names a TF Serving client uses (model, version label,
// signature_name, tensor names) reach v2 models, possibly on several v2
// servers. Parse validates a file strictly and reports every problem with
// its line; Map answers the lookups a request needs; Watcher keeps the
// current map and re-reads the file when it changes.
//
// A model the map does not list passes unchanged, so a nil *Map (no file)
// means "no mapping at all" and every method is nil-safe.
package modelmap

import (
	"strconv"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// DefaultServer is the name of the v2 server given by --backend. A map
// may not define a server of that name.
const DefaultServer = "default"

// DefaultSignature is the signature a request without signature_name uses.
const DefaultSignature = "serving_default"

// Map is one parsed, validated model map. It is immutable once Parse
// returns it, so requests may keep using an old Map while a reload
// installs a new one.
type Map struct {
	// Servers are the v2 servers besides the default one, by name.
	Servers map[string]*Server
	// Models are the mapped models, by the name TF clients use.
	Models map[string]*Model
	// SplitKeys are the distinct split_key header names of the map's
	// splits, sorted: a gRPC exchange names its model only in its
	// message, so it keeps these headers' values from its request
	// headers for the split's pick at its body.
	SplitKeys []string
}

// Server is one v2 server of the map.
type Server struct {
	Name string
	// URL is the server's root, e.g. "http://triton-onnx:8000".
	URL string
	// Kind is "auto" (a v2 server detected with GET /v2; the file's
	// "v2" means the same), "triton", "kserve", "mlserver", or
	// KindTFServing: a TF Serving REST server, which gets TF requests
	// unchanged (split.go).
	Kind string
	// BearerTokenFile, when set, is a file whose content is sent as
	// "Authorization: Bearer …" to this server (re-read when it changes).
	BearerTokenFile string
	// GRPC, when set, is the server's gRPC address (host:port, h2c):
	// a v2 server's GRPCInferenceService, where TF gRPC calls for its
	// models go translated, or for KindTFServing TF Serving's own gRPC
	// port (8500), where they go unchanged.
	GRPC string
}

// Model is one mapped TF model.
type Model struct {
	// Name is the TF name (/v1/models/NAME).
	Name string
	// Server is the server that serves it (DefaultServer when unset);
	// for a split model, the split's heaviest server.
	Server string
	// Split, when set, shares the model's exchanges among several
	// servers by weight (split.go); Server is then only its heaviest.
	Split *Split
	// Labels map version labels to versions.
	Labels map[string]int64
	// Default is the serving_default signature.
	Default *Signature
	// Signatures are the other signature_name values.
	Signatures map[string]*Signature
	// Shadow, when set, copies a sample of the model's requests to
	// another server and compares the answers (shadow.go).
	Shadow *Shadow
}

// Signature says where one TF signature of a model goes on the v2 side.
type Signature struct {
	// Name is the TF signature name.
	Name string
	// Model is the v2 model name.
	Model string
	// Inputs maps TF input names to v2 input names.
	Inputs map[string]string
	// Outputs maps TF output names to v2 output names.
	Outputs map[string]string
	// Metadata, when set, replaces what the v2 server publishes for the
	// model (in v2 names).
	Metadata *Metadata
}

// Metadata is an explicit v2 model signature, for servers that publish
// none (KServe's built-in predictors).
type Metadata struct {
	Inputs  []tensor.Spec
	Outputs []tensor.Spec
}

// Model returns the mapped model named name (its TF name), or nil when
// the map does not list it.
func (m *Map) Model(name string) *Model {
	if m == nil {
		return nil
	}
	return m.Models[name]
}

// Server returns the server named name, nil for DefaultServer or an
// unknown name.
func (m *Map) Server(name string) *Server {
	if m == nil {
		return nil
	}
	return m.Servers[name]
}

// ServerOf returns the server a TF model name is served by: its mapped
// server, else DefaultServer.
func (m *Map) ServerOf(tfModel string) string {
	if mm := m.Model(tfModel); mm != nil {
		return mm.Server
	}
	return DefaultServer
}

// Version resolves a version label. ok is false for a label the model
// does not define (TF: "Unrecognized servable version label").
func (m *Model) Version(label string) (version int64, ok bool) {
	if m == nil {
		return 0, false
	}
	v, ok := m.Labels[label]
	return v, ok
}

// Signature returns the signature a request's signature_name selects:
// "" and DefaultSignature select Default. ok is false for a name the
// model does not map.
func (m *Model) Signature(name string) (*Signature, bool) {
	if m == nil {
		return nil, false
	}
	if name == "" || name == DefaultSignature {
		return m.Default, true
	}
	s, ok := m.Signatures[name]
	return s, ok
}

// SignatureNames returns the model's signature names, DefaultSignature
// first, then the others sorted.
func (m *Model) SignatureNames() []string {
	names := make([]string, 0, 1+len(m.Signatures))
	names = append(names, DefaultSignature)
	return append(names, sortedKeys(m.Signatures)...)
}

// Summary says what m holds, for logs and validate-map: "2 models, 1
// server besides default".
func (m *Map) Summary() string {
	var models, servers int
	if m != nil {
		models, servers = len(m.Models), len(m.Servers)
	}
	return plural(models, "model") + ", " + plural(servers, "server") + " besides default"
}

func plural(n int, what string) string {
	switch n {
	case 0:
		return "no " + what
	case 1:
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
