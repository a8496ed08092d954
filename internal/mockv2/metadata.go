package mockv2

import (
	"net/http"
	"slices"
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Versions the mock reports for itself and its models.
const (
	tritonVersion        = "2.73.0"
	kserveVersion        = "0.20.0"
	mlserverVersion      = "1.7.0"
	tritonModelVersion   = "1"
	mlserverModelVersion = "1"
)

// tritonExtensions is the list Triton's core reports in server metadata,
// in its order.
var tritonExtensions = []string{
	"classification", "sequence", "model_repository", "model_repository(unload_dependents)",
	"schedule_policy", "model_configuration", "system_shared_memory", "cuda_shared_memory",
	"binary_tensor_data", "parameters", "statistics", "trace", "logging",
}

func (s *Server) serverMetadata(*http.Request) (*reply, *httpError) {
	type meta struct {
		Name       string   `json:"name"`
		Version    string   `json:"version"`
		Extensions []string `json:"extensions"`
	}
	switch s.kind {
	case kindKServe:
		return jsonReply(marshal(meta{"kserve", kserveVersion, []string{"model_repository_extension"}})), nil
	case kindMLServer:
		return jsonReply(marshal(meta{"mlserver", mlserverVersion, []string{}})), nil
	}
	return jsonReply(marshal(meta{"triton", tritonVersion, tritonExtensions})), nil
}

// health answers /v2/health/live and /ready: always live and ready. Triton
// and MLServer answer an empty 200, KServe a small JSON object.
func (s *Server) health(which string) func(*http.Request) (*reply, *httpError) {
	return func(*http.Request) (*reply, *httpError) {
		if s.kind != kindKServe {
			return &reply{status: http.StatusOK}, nil
		}
		if which == "live" {
			return jsonReply([]byte(`{"live":true}`)), nil
		}
		return jsonReply([]byte(`{"ready":true}`)), nil
	}
}

// sortedModels lists the models by name for repository listings.
func (s *Server) sortedModels() []*model {
	out := make([]*model, 0, len(s.models))
	for _, m := range s.models {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *model) int { return strings.Compare(a.name, b.name) })
	return out
}

// modelList is KServe's GET /v2/models.
func (s *Server) modelList(*http.Request) (*reply, *httpError) {
	var names []string
	for _, m := range s.sortedModels() {
		names = append(names, m.name)
	}
	return jsonReply(marshal(struct {
		Models []string `json:"models"`
	}{names})), nil
}

// repositoryIndex is POST /v2/repository/index (Triton, MLServer); the
// request body's "ready" filter changes nothing since every model is ready.
func (s *Server) repositoryIndex(*http.Request) (*reply, *httpError) {
	type entry struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		State   string `json:"state"`
		Reason  string `json:"reason,omitempty"`
	}
	var out []entry
	for _, m := range s.sortedModels() {
		v := tritonModelVersion
		if s.kind == kindMLServer {
			v = mlserverModelVersion
		}
		out = append(out, entry{Name: m.name, Version: v, State: "READY"})
	}
	return jsonReply(marshal(out)), nil
}

type metaTensor struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

func (s *Server) metaTensors(m *model, specs []tensor.Spec) []metaTensor {
	out := make([]metaTensor, 0, len(specs))
	for _, sp := range specs {
		out = append(out, metaTensor{Name: sp.Name, Datatype: sp.DataType.String(), Shape: m.metaShape(sp.Shape)})
	}
	return out
}

// modelMetadata answers GET /v2/models/{m}[/versions/{v}].
func (s *Server) modelMetadata(ref modelRef) (*reply, *httpError) {
	m, herr := s.lookup(ref)
	if herr != nil {
		return nil, herr
	}
	in, out := s.metaTensors(m, m.inputs), s.metaTensors(m, m.outputs)
	if m.opaque {
		in, out = []metaTensor{}, []metaTensor{}
	}
	switch s.kind {
	case kindKServe:
		// A KServe custom model that declares its tensors; KServe has no
		// versions and no platform.
		return jsonReply(marshal(struct {
			Name     string       `json:"name"`
			Versions []string     `json:"versions"`
			Platform string       `json:"platform"`
			Inputs   []metaTensor `json:"inputs"`
			Outputs  []metaTensor `json:"outputs"`
		}{m.name, nil, "", in, out})), nil
	case kindMLServer:
		return jsonReply(marshal(struct {
			Name     string       `json:"name"`
			Versions []string     `json:"versions"`
			Platform string       `json:"platform"`
			Inputs   []metaTensor `json:"inputs"`
			Outputs  []metaTensor `json:"outputs"`
		}{m.name, []string{mlserverModelVersion}, "", in, out})), nil
	}
	return jsonReply(marshal(struct {
		Name     string       `json:"name"`
		Versions []string     `json:"versions"`
		Platform string       `json:"platform"`
		Inputs   []metaTensor `json:"inputs"`
		Outputs  []metaTensor `json:"outputs"`
	}{m.name, []string{tritonModelVersion}, m.platform, in, out})), nil
}

// modelReady answers GET .../ready: every known model is ready.
func (s *Server) modelReady(ref modelRef) (*reply, *httpError) {
	m, herr := s.lookup(ref)
	if herr != nil {
		return nil, herr
	}
	if s.kind == kindKServe {
		return jsonReply(marshal(struct {
			Name  string `json:"name"`
			Ready bool   `json:"ready"`
		}{m.name, true})), nil
	}
	return &reply{status: http.StatusOK}, nil
}

// backendOf maps a Triton platform to the backend its config names.
func backendOf(platform string) string {
	switch platform {
	case "onnxruntime_onnx":
		return "onnxruntime"
	case "tensorflow_savedmodel", "tensorflow_graphdef":
		return "tensorflow"
	case "tensorrt_plan":
		return "tensorrt"
	case "pytorch_libtorch":
		return "pytorch"
	}
	return platform
}

// modelConfig answers Triton's GET .../config: the model configuration as
// protobuf JSON with snake_case names, int64 dims as JSON numbers (Triton
// rewrites protobuf's quoted int64s) and datatypes as TYPE_* names.
func (s *Server) modelConfig(ref modelRef) (*reply, *httpError) {
	m, herr := s.lookup(ref)
	if herr != nil {
		return nil, herr
	}
	type configInput struct {
		Name             string  `json:"name"`
		DataType         string  `json:"data_type"`
		Format           string  `json:"format"`
		Dims             []int64 `json:"dims"`
		IsShapeTensor    bool    `json:"is_shape_tensor"`
		AllowRaggedBatch bool    `json:"allow_ragged_batch"`
		Optional         bool    `json:"optional"`
	}
	type configOutput struct {
		Name          string  `json:"name"`
		DataType      string  `json:"data_type"`
		Dims          []int64 `json:"dims"`
		LabelFilename string  `json:"label_filename"`
		IsShapeTensor bool    `json:"is_shape_tensor"`
	}
	type latest struct {
		NumVersions int `json:"num_versions"`
	}
	type policy struct {
		Latest latest `json:"latest"`
	}
	cfg := struct {
		Name          string         `json:"name"`
		Platform      string         `json:"platform"`
		Backend       string         `json:"backend"`
		VersionPolicy policy         `json:"version_policy"`
		MaxBatchSize  int64          `json:"max_batch_size"`
		Input         []configInput  `json:"input"`
		Output        []configOutput `json:"output"`
	}{Name: m.name, Platform: m.platform, Backend: backendOf(m.platform),
		VersionPolicy: policy{latest{1}}, MaxBatchSize: m.maxBatch}
	for _, sp := range m.inputs {
		cfg.Input = append(cfg.Input, configInput{Name: sp.Name, DataType: tritonTypeName(sp.DataType), Format: "FORMAT_NONE", Dims: sp.Shape})
	}
	for _, sp := range m.outputs {
		cfg.Output = append(cfg.Output, configOutput{Name: sp.Name, DataType: tritonTypeName(sp.DataType), Dims: sp.Shape})
	}
	return jsonReply(marshal(cfg)), nil
}

// tritonTypeName is a datatype's model-config name (TYPE_STRING for BYTES).
func tritonTypeName(dt tensor.DataType) string {
	if dt == tensor.Bytes {
		return "TYPE_STRING"
	}
	return "TYPE_" + dt.String()
}
