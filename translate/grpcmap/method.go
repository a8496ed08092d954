package grpcmap

// Method is a TF Serving gRPC method.
type Method uint8

// The methods of PredictionService and ModelService.
const (
	Predict Method = iota + 1
	Classify
	Regress
	MultiInference
	GetModelMetadata
	GetModelStatus
	HandleReloadConfigRequest
)

var methodPaths = [...]string{
	Predict:                   "/tensorflow.serving.PredictionService/Predict",
	Classify:                  "/tensorflow.serving.PredictionService/Classify",
	Regress:                   "/tensorflow.serving.PredictionService/Regress",
	MultiInference:            "/tensorflow.serving.PredictionService/MultiInference",
	GetModelMetadata:          "/tensorflow.serving.PredictionService/GetModelMetadata",
	GetModelStatus:            "/tensorflow.serving.ModelService/GetModelStatus",
	HandleReloadConfigRequest: "/tensorflow.serving.ModelService/HandleReloadConfigRequest",
}

// ParseMethod maps a gRPC request path (":path") to its method. gRPC
// paths are case-sensitive and carry no query.
func ParseMethod(path string) (Method, bool) {
	for m, p := range methodPaths {
		if p != "" && p == path {
			return Method(m), true
		}
	}
	return 0, false
}

// Path returns the method's gRPC path.
func (m Method) Path() string {
	if int(m) < len(methodPaths) {
		return methodPaths[m]
	}
	return ""
}

// String returns the method's name ("Predict").
func (m Method) String() string {
	p := m.Path()
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return "Method(?)"
}

// The v2 gRPC paths tfsbridge calls.
const (
	V2ModelInfer    = "/inference.GRPCInferenceService/ModelInfer"
	V2ModelMetadata = "/inference.GRPCInferenceService/ModelMetadata"
	V2ModelReady    = "/inference.GRPCInferenceService/ModelReady"
)
