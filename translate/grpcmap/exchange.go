package grpcmap

import (
	"errors"
	"strconv"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

// Resolver looks up what a request's ModelSpec names: r is the model
// spec as a route (Verb: Predict, Classify, Regress, Metadata or Status;
// Model; Version/HasVersion; Label), signatureName the signature asked
// for ("serving_default" when the request names none; "" for metadata
// and status, which name none).
//
// Its errors reach the client as they are, so they should be
// *apierr.Error with TF's texts: NOT_FOUND "Servable not found for
// request: …" (route.Route.Servable), INVALID_ARGUMENT "Unrecognized
// servable version label: L". For a signature the model does not have it
// returns ErrUnknownSignature (or an error wrapping it), and the pipeline
// words it as TF Serving does for the method.
type Resolver func(r route.Route, signatureName string) (Target, error)

// ErrUnknownSignature is a Resolver's answer for a signature name the
// model does not have.
var ErrUnknownSignature = errors.New("unknown signature")

// Target is what a Resolver found.
type Target struct {
	// Signature is the model's signature in TF names (Wire holds the v2
	// names when the model map renames tensors). Nil or without inputs
	// means the v2 metadata says nothing (KServe's usual answer): the
	// request's tensors are then sent as they are, unchecked.
	Signature *tensor.Signature
	// Model is the v2 model_name; "" means the TF model name.
	Model string
	// Version is the v2 model_version; "" means the TF version in
	// decimal when the request names one, else the server's latest.
	Version string
	// Served is the version number TF reports in answers (a label
	// resolved to its version), when HasServed.
	Served    int64
	HasServed bool
	// Signatures, when set, are every signature of the model in TF names
	// (the model map's signature entries): GetModelMetadata lists them
	// instead of the one "serving_default" it builds from v2 metadata.
	Signatures []tfgrpc.SignatureDef
}

// Options configure the pipelines.
type Options struct {
	// Kind is the v2 server: BF16 inputs go to Triton only.
	Kind oip.ServerKind
	// Encoding is how PredictResponse writes tensors: TF Serving's
	// default typed fields, or tensor_content as with its
	// --enable_serialization_as_tensor_content.
	Encoding tfgrpc.Encoding
	// Limits bound the elements one message may make a pipeline build.
	Limits tensor.Limits
	// MaxBytes bounds every message a pipeline writes (a short typed
	// field broadcasts to its whole shape; a negative int32 takes 10
	// bytes in int_val): over it the call fails RESOURCE_EXHAUSTED. 0
	// means DefaultMaxBytes.
	MaxBytes int64
	// ID is the v2 request id; "" sends none.
	ID string
	// DefaultVersion is the version answers report when neither the
	// request, the resolver, nor the v2 server names a numeric one
	// (KServe, MLServer), when HasDefaultVersion; else model_spec.version
	// is left unset (docs/grpc.md §9 question 1).
	DefaultVersion    int64
	HasDefaultVersion bool
}

// DefaultMaxBytes is Options.MaxBytes when it is 0: TF Serving and
// Triton accept INT32_MAX; 256 MiB holds a batch of 400 224x224x3 float
// images and bounds what a 20-byte request asking for a broadcast can
// cost.
const DefaultMaxBytes = 256 << 20

func (o Options) maxBytes() int64 {
	if o.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return o.MaxBytes
}

// Exchange is what a response step needs to know about its request step.
type Exchange struct {
	Method Method
	// Route is the request's model spec as a route (TF names).
	Route route.Route
	// SignatureName is the resolved signature ("serving_default" when
	// the request named none).
	SignatureName string
	Target        Target
	// Outputs are the TF output aliases asked for (output_filter), nil
	// for all.
	Outputs []string
	// Examples is the number of tf.Examples of a classify or regress call.
	Examples int
	// V2Path is the v2 method called (V2ModelInfer, V2ModelMetadata,
	// V2ModelReady).
	V2Path string
}

// spec returns the model_spec TF answers with: the request's name, the
// signature, and the served version (see servedVersion).
func (ex *Exchange) spec(signature bool, v2Version string, versions []string, opt Options) tfgrpc.ModelSpec {
	s := tfgrpc.ModelSpec{Name: ex.Route.Model}
	if signature {
		s.SignatureName = ex.SignatureName
	}
	s.Version, s.HasVersion = ex.servedVersion(v2Version, versions, opt)
	return s
}

// servedVersion is the version TF names in answers: the request's, the
// resolver's (a label), the numeric v2 version the call named, the v2
// server's when numeric (Triton answers the executed version), the
// highest numeric version v2 metadata lists, the configured default, or
// none.
func (ex *Exchange) servedVersion(v2Version string, versions []string, opt Options) (int64, bool) {
	switch {
	case ex.Route.HasVersion:
		return ex.Route.Version, true
	case ex.Target.HasServed:
		return ex.Target.Served, true
	}
	if v, ok := parseVersion(ex.Target.Version); ok {
		return v, true // the version the call named
	}
	if v, ok := parseVersion(v2Version); ok {
		return v, true
	}
	best, found := int64(0), false
	for _, s := range versions {
		if v, ok := parseVersion(s); ok && (!found || v > best) {
			best, found = v, true
		}
	}
	if found {
		return best, true
	}
	return opt.DefaultVersion, opt.HasDefaultVersion
}

// parseVersion reads a decimal, non-negative version.
func parseVersion(s string) (int64, bool) {
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// v2Model is the model name and version the v2 call names.
func (ex *Exchange) v2Model() (string, string) {
	model, version := ex.Target.Model, ex.Target.Version
	if model == "" {
		model = ex.Route.Model
	}
	if version == "" && ex.Route.HasVersion {
		version = strconv.FormatInt(ex.Route.Version, 10)
	}
	return model, version
}

// routeOf is spec as a route for verb v.
func routeOf(v route.Verb, s *tfgrpc.ModelSpec) route.Route {
	return route.Route{Verb: v, Model: s.Name, Version: s.Version, HasVersion: s.HasVersion, Label: s.VersionLabel}
}

// The request errors every method shares (docs/grpc.md §3.2).
var (
	errMissingSpec = apierr.New(apierr.InvalidArgument, "Missing ModelSpec")
	errNoName      = apierr.New(apierr.InvalidArgument, "ModelSpec has no name specified.")
)

// errParse is a TF message protobuf cannot parse: gRPC C++'s
// deserializer answers INTERNAL with the message's
// InitializationErrorString, empty for proto3 (grpcpp
// GenericDeserialize), before TF Serving sees the call.
func errParse(cause error) error { return apierr.Wrap(apierr.Internal, cause, "") }

// findSpec resolves a message's model spec for verb v, after the checks
// TF Serving makes on every servable lookup: a model_spec present, a
// name, a non-negative version (a negative one names no servable).
func findSpec(has bool, s *tfgrpc.ModelSpec, v route.Verb, signatureName string, resolve Resolver) (route.Route, Target, error) {
	if !has {
		return route.Route{}, Target{}, errMissingSpec
	}
	if s.Name == "" {
		return route.Route{}, Target{}, errNoName
	}
	r := routeOf(v, s)
	if r.HasVersion && r.Version < 0 {
		return r, Target{}, notFound(r)
	}
	t, err := resolve(r, signatureName)
	return r, t, err
}

func notFound(r route.Route) error {
	return apierr.New(apierr.NotFound, "Servable not found for request: "+r.Servable())
}

// toWire returns the v2 name of TF tensor name among specs (sig's inputs
// or outputs), given the matching wire specs.
func toWire(name string, specs, wire []tensor.Spec) string {
	for i := range specs {
		if specs[i].Name == name && i < len(wire) {
			return wire[i].Name
		}
	}
	return name
}

// fromWire returns the TF name of v2 tensor name.
func fromWire(name string, specs, wire []tensor.Spec) string {
	for i := range wire {
		if wire[i].Name == name && i < len(specs) {
			return specs[i].Name
		}
	}
	return name
}
