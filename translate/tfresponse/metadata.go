package tfresponse

import (
	"slices"
	"strconv"
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Metadata appends the body of TF Serving's model metadata answer
// (GET /v1/models/{m}[/versions/{v}]/metadata, docs/tfserving-rest.md §2.2) for sig, the
// signature built from v2 model metadata, served as version.
//
// TF Serving hand-glues two protobuf-JSON documents
// (http_rest_api_util.cc ToJsonString):
//
//	{\n"model_spec":<ModelSpec>,\n"metadata": {"signature_def": <SignatureDefMap>}\n}\n
//
// This writes the same glue and layout with what v2 metadata can tell:
//   - one signature, "serving_default", with method_name
//     "tensorflow/serving/predict" (the only method tfsbridge serves);
//   - inputs and outputs keyed by their v2 names, sorted (protobuf map
//     order is unspecified);
//   - TensorInfo.name, the graph tensor name, which v2 does not know, is
//     written as "<name>:0", TF's "<op>:<output index>" form, so clients
//     that split it keep working;
//   - dtype from the datatype table (FP16 → DT_HALF), dims as quoted
//     int64 sizes with "name": "", unknown_rank false, and "defaults": {}.
//
// version "" omits model_spec.version (an unset Int64Value). A nil sig
// writes an empty signature.
func Metadata(dst []byte, sig *tensor.Signature, version string) []byte {
	if sig == nil {
		sig = &tensor.Signature{}
	}
	return MetadataDefs(dst, sig.Model, version, []SignatureDef{{Name: "serving_default", Signature: sig}})
}

// SignatureDef is one entry of a metadata answer's signature_def map.
type SignatureDef struct {
	Name      string
	Signature *tensor.Signature
}

// MetadataDefs is Metadata for a model with several signatures (the model
// map's signature_name entries), written in the order given (callers sort
// them; TF's map order is unspecified).
func MetadataDefs(dst []byte, model, version string, defs []SignatureDef) []byte {
	dst = append(dst, "{\n\"model_spec\":"...)
	p := protoWriter{buf: dst}
	p.open('{')
	p.key("name")
	p.str(model)
	if version != "" {
		p.key("version")
		p.str(version)
	}
	p.key("signature_name")
	p.str("")
	p.close('}')
	dst = p.end()

	dst = append(dst, ",\n\"metadata\": {\"signature_def\": "...)
	p = protoWriter{buf: dst}
	p.open('{')
	p.key("signature_def")
	p.open('{')
	for _, d := range defs {
		sig := d.Signature
		if sig == nil {
			sig = &tensor.Signature{}
		}
		p.key(d.Name)
		p.open('{')
		p.key("inputs")
		writeTensorInfoMap(&p, sig.Inputs)
		p.key("outputs")
		writeTensorInfoMap(&p, sig.Outputs)
		p.key("method_name")
		p.str("tensorflow/serving/predict")
		p.key("defaults")
		p.open('{')
		p.close('}')
		p.close('}')
	}
	p.close('}')
	p.close('}')
	dst = p.end()
	return append(dst, "}\n}\n"...)
}

// writeTensorInfoMap writes a map<string, TensorInfo> sorted by key.
func writeTensorInfoMap(p *protoWriter, specs []tensor.Spec) {
	sorted := slices.Clone(specs)
	slices.SortStableFunc(sorted, func(a, b tensor.Spec) int { return strings.Compare(a.Name, b.Name) })
	p.open('{')
	for _, s := range sorted {
		p.key(s.Name)
		p.open('{') // TensorInfo: name = 1, dtype = 2, tensor_shape = 3
		p.key("name")
		p.str(s.Name + ":0")
		p.key("dtype")
		p.str(s.DataType.TFName())
		p.key("tensor_shape")
		p.open('{') // TensorShapeProto: dim = 2, unknown_rank = 3
		p.key("dim")
		p.open('[')
		for _, d := range s.Shape {
			p.next()
			p.open('{') // Dim: size = 1, name = 2
			p.key("size")
			p.str(strconv.FormatInt(d, 10))
			p.key("name")
			p.str("")
			p.close('}')
		}
		p.close(']')
		p.key("unknown_rank")
		p.raw("false")
		p.close('}')
		p.close('}')
	}
	p.close('}')
}
