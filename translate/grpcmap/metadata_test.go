package grpcmap

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/internal/grpcproto"
	"github.com/tfsbridge/tfsbridge/translate/oipgrpc"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

func metadataRequest(spec *grpcproto.Spec, fields ...string) []byte {
	m := grpcproto.New("tensorflow.serving.GetModelMetadataRequest")
	if spec != nil {
		grpcproto.ModelSpec(m, *spec)
	}
	for _, f := range fields {
		grpcproto.Append(m, "metadata_field", valStr(f))
	}
	return grpcproto.Marshal(m)
}

func statusRequest(spec *grpcproto.Spec) []byte {
	m := grpcproto.New("tensorflow.serving.GetModelStatusRequest")
	if spec != nil {
		grpcproto.ModelSpec(m, *spec)
	}
	return grpcproto.Marshal(m)
}

func mapGet(m protoreflect.Message, field, key string) protoreflect.Message {
	v := grpcproto.Get(m, field).Map().Get(protoreflect.ValueOfString(key).MapKey())
	if !v.IsValid() {
		return nil
	}
	return v.Message()
}

func TestMetadata(t *testing.T) {
	sig := testSig()
	wire := testSig()
	wire.Outputs[0].Name = "OUT0"
	sig.Wire = wire
	resolve := func(r route.Route, name string) (Target, error) {
		if r.Verb != route.Metadata || name != "" {
			t.Errorf("resolver asked %+v %q", r, name)
		}
		return Target{Signature: sig, Model: "m_v2"}, nil
	}
	out, ex, err := MetadataRequest(nil, metadataRequest(&grpcproto.Spec{Name: "m"}, "signature_def"), resolve, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if name, version, err := oipgrpc.DecodeModelRequest(out); name != "m_v2" || version != "" || err != nil || ex.V2Path != V2ModelMetadata {
		t.Errorf("v2 request %q %q %v, %s", name, version, err, ex.V2Path)
	}
	b, err := MetadataResponse(nil, oipgrpc.AppendModelMetadata(nil, wire), ex, Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := grpcproto.Unmarshal("tensorflow.serving.GetModelMetadataResponse", b)
	if err != nil {
		t.Fatal(err)
	}
	spec := grpcproto.Get(resp, "model_spec").Message()
	if grpcproto.Get(spec, "name").String() != "m" || grpcproto.Get(grpcproto.Get(spec, "version").Message(), "value").Int() != 3 ||
		grpcproto.Get(spec, "signature_name").String() != "" {
		t.Errorf("model_spec %v (want the highest listed version)", spec)
	}
	anyMsg := mapGet(resp, "metadata", "signature_def")
	if anyMsg == nil {
		t.Fatalf("no signature_def in %v", resp)
	}
	if url := grpcproto.Get(anyMsg, "type_url").String(); url != "type.googleapis.com/tensorflow.serving.SignatureDefMap" {
		t.Errorf("type_url %q", url)
	}
	defs, err := grpcproto.Unmarshal("tensorflow.serving.SignatureDefMap", grpcproto.Get(anyMsg, "value").Bytes())
	if err != nil {
		t.Fatal(err)
	}
	def := mapGet(defs, "signature_def", "serving_default")
	if def == nil || grpcproto.Get(def, "method_name").String() != "tensorflow/serving/predict" {
		t.Fatalf("signature def %v", defs)
	}
	x, y, z := mapGet(def, "inputs", "x"), mapGet(def, "outputs", "y"), mapGet(def, "outputs", "z")
	if x == nil || y == nil || z == nil {
		t.Fatalf("tensors %v", def)
	}
	dims := grpcproto.Get(grpcproto.Get(x, "tensor_shape").Message(), "dim").List()
	if grpcproto.Get(x, "name").String() != "x:0" || grpcproto.Get(x, "dtype").Int() != 1 || dims.Len() != 2 ||
		grpcproto.Get(dims.Get(0).Message(), "size").Int() != -1 || grpcproto.Get(dims.Get(1).Message(), "size").Int() != 2 {
		t.Errorf("input x %v", x)
	}
	if grpcproto.Get(z, "dtype").Int() != 7 || grpcproto.Get(y, "name").String() != "y:0" {
		t.Errorf("outputs %v %v", y, z)
	}
}

func TestMetadataErrors(t *testing.T) {
	tests := []struct {
		name   string
		msg    []byte
		code   apierr.Code
		errMsg string
	}{
		{"no model_spec", metadataRequest(nil, "signature_def"), apierr.InvalidArgument, "Missing ModelSpec"},
		{"no field", metadataRequest(&grpcproto.Spec{Name: "m"}), apierr.InvalidArgument, "GetModelMetadataRequest must specify at least one metadata_field"},
		{"field checked before the model", metadataRequest(&grpcproto.Spec{Name: "nope"}, "signature_def", "graph"), apierr.InvalidArgument, "Metadata field graph is not supported"},
		{"empty name", metadataRequest(&grpcproto.Spec{}, "signature_def"), apierr.InvalidArgument, "ModelSpec has no name specified."},
		{"unknown model", metadataRequest(&grpcproto.Spec{Name: "nope", Version: v(2)}, "signature_def"), apierr.NotFound, "Servable not found for request: Specific(nope, 2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := MetadataRequest(nil, tt.msg, fixed(testSig(), nil), Options{})
			wantErr(t, err, tt.code, tt.errMsg)
		})
	}
}

// versions decodes a GetModelStatusResponse into (version, state,
// error_code) triples, checking that status is always present.
func versions(t *testing.T, b []byte) [][3]int64 {
	t.Helper()
	resp, err := grpcproto.Unmarshal("tensorflow.serving.GetModelStatusResponse", b)
	if err != nil {
		t.Fatal(err)
	}
	l := grpcproto.Get(resp, "model_version_status").List()
	var out [][3]int64
	for i := 0; i < l.Len(); i++ {
		s := l.Get(i).Message()
		if !s.Has(grpcproto.Field(s, "status")) {
			t.Errorf("entry %d has no status", i)
		}
		st := grpcproto.Get(s, "status").Message()
		out = append(out, [3]int64{grpcproto.Get(s, "version").Int(), grpcproto.Get(s, "state").Int(), grpcproto.Get(st, "error_code").Int()})
	}
	return out
}

func TestGetModelStatus(t *testing.T) {
	var asked route.Route
	tests := []struct {
		name   string
		spec   grpcproto.Spec
		v2Path string
		answer []byte
		opt    Options
		want   [][3]int64
	}{
		{"version ready", grpcproto.Spec{Name: "m", Version: v(3), Label: ""}, V2ModelReady, oipgrpc.AppendModelReady(nil, true), Options{}, [][3]int64{{3, 30, 0}}},
		{"version not ready", grpcproto.Spec{Name: "m", Version: v(3)}, V2ModelReady, oipgrpc.AppendModelReady(nil, false), Options{}, [][3]int64{{3, 20, 0}}},
		{"all versions, descending", grpcproto.Spec{Name: "m"}, V2ModelMetadata,
			oipgrpc.AppendModelMetadata(nil, &tensor.Signature{Versions: []string{"1", "10", "3"}}), Options{}, [][3]int64{{10, 30, 0}, {3, 30, 0}, {1, 30, 0}}},
		{"label ignored", grpcproto.Spec{Name: "m", Label: "stable"}, V2ModelMetadata,
			oipgrpc.AppendModelMetadata(nil, &tensor.Signature{Versions: []string{"2"}}), Options{}, [][3]int64{{2, 30, 0}}},
		{"KServe lists none: the default version", grpcproto.Spec{Name: "m"}, V2ModelMetadata,
			oipgrpc.AppendModelMetadata(nil, &tensor.Signature{}), Options{DefaultVersion: 7, HasDefaultVersion: true}, [][3]int64{{7, 30, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, ex, err := StatusRequest(nil, statusRequest(&tt.spec), fixed(testSig(), &asked), tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			name, version, _ := oipgrpc.DecodeModelRequest(out)
			if ex.V2Path != tt.v2Path || name != "m" || asked.Verb != route.Status || asked.Label != "" ||
				(tt.spec.Version != nil) != (version != "") {
				t.Errorf("v2 %s %q %q, asked %+v", ex.V2Path, name, version, asked)
			}
			b, err := StatusResponse(nil, tt.answer, ex, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			got := versions(t, b)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestGetModelStatusErrors(t *testing.T) {
	tests := []struct {
		name   string
		msg    []byte
		code   apierr.Code
		errMsg string
	}{
		{"no model_spec", statusRequest(nil), apierr.InvalidArgument, "Missing ModelSpec"},
		{"empty name", statusRequest(&grpcproto.Spec{}), apierr.NotFound, "Could not find any versions of model "},
		{"unknown model", statusRequest(&grpcproto.Spec{Name: "n"}), apierr.NotFound, "Could not find any versions of model n"},
		{"unknown model, version", statusRequest(&grpcproto.Spec{Name: "n", Version: v(3)}), apierr.NotFound, "Could not find version 3 of model n"},
		{"negative version", statusRequest(&grpcproto.Spec{Name: "m", Version: v(-2)}), apierr.NotFound, "Could not find version -2 of model m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := StatusRequest(nil, tt.msg, fixed(testSig(), nil), Options{})
			wantErr(t, err, tt.code, tt.errMsg)
		})
	}
}

// A model map's several signatures are all listed, sorted by name.
func TestMetadataSignatures(t *testing.T) {
	defs := []tfgrpc.SignatureDef{
		{Name: "serving_default", Signature: testSig(), Method: "tensorflow/serving/predict"},
		{Name: "classify", Signature: classifySig(), Method: "tensorflow/serving/classify"},
	}
	ex := &Exchange{Method: GetModelMetadata, Route: route.Route{Model: "m", Version: 2, HasVersion: true}, Target: Target{Signatures: defs}}
	b, err := MetadataResponse(nil, oipgrpc.AppendModelMetadata(nil, testSig()), ex, Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := grpcproto.Unmarshal("tensorflow.serving.GetModelMetadataResponse", b)
	value := grpcproto.Get(mapGet(resp, "metadata", "signature_def"), "value").Bytes()
	m, err := grpcproto.Unmarshal("tensorflow.serving.SignatureDefMap", value)
	if err != nil {
		t.Fatal(err)
	}
	c := mapGet(m, "signature_def", "classify")
	if grpcproto.Get(m, "signature_def").Map().Len() != 2 || c == nil || grpcproto.Get(c, "method_name").String() != "tensorflow/serving/classify" ||
		mapGet(c, "inputs", "inputs") == nil {
		t.Errorf("signatures %v", m)
	}
	spec := grpcproto.Get(resp, "model_spec").Message()
	if grpcproto.Get(grpcproto.Get(spec, "version").Message(), "value").Int() != 2 {
		t.Errorf("model_spec %v", spec)
	}
}
