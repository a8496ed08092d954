package grpcmap

import (
	"slices"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oipgrpc"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

// signatureDefField is the one metadata field TF Serving serves.
const signatureDefField = "signature_def"

// predictMethod is the method_name of the synthesised signature, as the
// REST metadata answer writes it (tfresponse.Metadata).
const predictMethod = "tensorflow/serving/predict"

// MetadataRequest translates a GetModelMetadataRequest into a
// ModelMetadataRequest, after TF Serving's checks in its order
// (get_model_metadata_impl.cc): model_spec present, then the metadata
// fields (at least one, each "signature_def") before the model is looked
// up, then the name and the servable (the resolver).
func MetadataRequest(dst, msg []byte, resolve Resolver, opt Options) ([]byte, *Exchange, error) {
	req, err := tfgrpc.DecodeMetadataRequest(msg)
	if err != nil {
		return nil, nil, errParse(err)
	}
	if !req.HasSpec {
		return nil, nil, errMissingSpec
	}
	if len(req.Fields) == 0 {
		return nil, nil, apierr.New(apierr.InvalidArgument, "GetModelMetadataRequest must specify at least one metadata_field")
	}
	for _, f := range req.Fields {
		if f != signatureDefField {
			return nil, nil, apierr.InvalidArgumentf("Metadata field %s is not supported", f)
		}
	}
	r, target, err := findSpec(true, &req.Spec, route.Metadata, "", resolve)
	if err != nil {
		return nil, nil, err
	}
	ex := &Exchange{Method: GetModelMetadata, Route: r, Target: target, V2Path: V2ModelMetadata}
	model, version := ex.v2Model()
	return oipgrpc.AppendModelRequest(dst, model, version), ex, nil
}

// MetadataResponse translates the ModelMetadataResponse answering a
// request MetadataRequest made into TF's GetModelMetadataResponse (see
// MetadataFromSignature).
func MetadataResponse(dst, msg []byte, ex *Exchange, opt Options) ([]byte, error) {
	sig, err := oipgrpc.DecodeModelMetadata(msg)
	if err != nil {
		return nil, err
	}
	return MetadataFromSignature(dst, sig, ex, opt)
}

// MetadataFromSignature writes TF's GetModelMetadataResponse from v2
// metadata already decoded (wire names; a transport with the metadata
// cached answers without a call): model_spec {name, version} and
// metadata["signature_def"] = SignatureDefMap{"serving_default": …},
// each tensor in TF's names (the resolver's renames), its TensorInfo
// name invented as "<name>:0", dims as v2 declares them (-1 kept); or,
// when the resolver gave them (Target.Signatures), every signature of
// the model.
func MetadataFromSignature(dst []byte, wire *tensor.Signature, ex *Exchange, opt Options) ([]byte, error) {
	sig := &tensor.Signature{Model: wire.Model, Versions: wire.Versions, Inputs: slices.Clone(wire.Inputs), Outputs: slices.Clone(wire.Outputs)}
	if t := ex.Target.Signature; t != nil && t.Wire != nil {
		for i := range sig.Inputs {
			sig.Inputs[i].Name = fromWire(sig.Inputs[i].Name, t.Inputs, t.Wire.Inputs)
		}
		for i := range sig.Outputs {
			sig.Outputs[i].Name = fromWire(sig.Outputs[i].Name, t.Outputs, t.Wire.Outputs)
		}
	}
	defs := ex.Target.Signatures
	if len(defs) == 0 {
		defs = []tfgrpc.SignatureDef{{Name: DefaultSignature, Signature: sig, Method: predictMethod}}
	} else if slices.ContainsFunc(defs, func(d tfgrpc.SignatureDef) bool { return d.Method == "" }) {
		defs = slices.Clone(defs)
		for i := range defs {
			if defs[i].Method == "" {
				defs[i].Method = predictMethod
			}
		}
	}
	spec := ex.spec(false, "", wire.Versions, opt)
	out := tfgrpc.AppendMetadataResponse(dst, spec, defs)
	if int64(len(out)-len(dst)) > opt.maxBytes() {
		return nil, tooLarge("GetModelMetadataResponse", opt)
	}
	return out, nil
}

// StatusRequest translates a GetModelStatusRequest: with a version, into
// a ModelReadyRequest for it; without, into a ModelMetadataRequest (its
// versions list). TF Serving checks only that model_spec is present; a
// label is ignored, and an empty name or a negative version simply
// names nothing (NOT_FOUND with its status texts, answered here without
// a call).
func StatusRequest(dst, msg []byte, resolve Resolver, opt Options) ([]byte, *Exchange, error) {
	req, err := tfgrpc.DecodeStatusRequest(msg)
	if err != nil {
		return nil, nil, errParse(err)
	}
	if !req.HasSpec {
		return nil, nil, errMissingSpec
	}
	s := req.Spec
	s.VersionLabel = ""
	ex := &Exchange{Method: GetModelStatus, Route: routeOf(route.Status, &s), V2Path: V2ModelMetadata}
	if ex.Route.HasVersion {
		ex.V2Path = V2ModelReady
	}
	if s.Name == "" || (s.HasVersion && s.Version < 0) {
		return nil, nil, notFoundFor(ex)
	}
	if ex.Target, err = resolve(ex.Route, ""); err != nil {
		if apierr.As(err).Code == apierr.NotFound {
			return nil, nil, notFoundFor(ex)
		}
		return nil, nil, err
	}
	model, version := ex.v2Model()
	return oipgrpc.AppendModelRequest(dst, model, version), ex, nil
}

// StatusResponse translates the v2 answer to a request StatusRequest
// made into TF's GetModelStatusResponse (docs/grpc.md §6.6): a ready version is
// AVAILABLE, one the server knows but has not ready LOADING (docs/grpc.md §9
// question 2: TF's monitor would say LOADING while it loads, END after a
// failed load; v2 cannot tell them apart); without a version, every
// numeric version the metadata lists, descending, AVAILABLE (Triton lists
// the ready ones), or when it lists none (KServe, MLServer's names) one
// entry for the configured default version (0 when none).
func StatusResponse(dst, msg []byte, ex *Exchange, opt Options) ([]byte, error) {
	if ex.V2Path == V2ModelReady {
		ready, err := oipgrpc.DecodeModelReady(msg)
		if err != nil {
			return nil, err
		}
		state := tfgrpc.StateAvailable
		if !ready {
			state = tfgrpc.StateLoading
		}
		return tfgrpc.AppendStatusResponse(dst, []tfgrpc.VersionStatus{{Version: ex.Route.Version, State: state}}), nil
	}
	sig, err := oipgrpc.DecodeModelMetadata(msg)
	if err != nil {
		return nil, err
	}
	return StatusFromVersions(dst, sig.Versions, opt), nil
}

// StatusFromVersions writes the GetModelStatusResponse for a model whose
// v2 metadata lists versions (see StatusResponse).
func StatusFromVersions(dst []byte, versions []string, opt Options) []byte {
	var nums []int64
	for _, s := range versions {
		if v, ok := parseVersion(s); ok {
			nums = append(nums, v)
		}
	}
	slices.Sort(nums)
	nums = slices.Compact(nums)
	slices.Reverse(nums)
	if len(nums) == 0 {
		nums = []int64{opt.DefaultVersion}
	}
	list := make([]tfgrpc.VersionStatus, len(nums))
	for i, v := range nums {
		list[i] = tfgrpc.VersionStatus{Version: v, State: tfgrpc.StateAvailable}
	}
	return tfgrpc.AppendStatusResponse(dst, list)
}
