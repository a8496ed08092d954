package grpcmap

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/oipgrpc"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

// DefaultSignature is the signature a request that names none asks for.
const DefaultSignature = "serving_default"

// predictInput is one request input checked and ready to write.
type predictInput struct {
	alias string
	tp    *tfgrpc.TensorProto
	dt    tensor.DataType
	n     int64
	size  int64
}

// PredictRequest translates a PredictRequest into a ModelInferRequest,
// appended to dst, making TF Serving's checks in its order (docs/grpc.md §3.3)
// against the signature the resolver returns: model spec, signature
// (FAILED_PRECONDITION), input count, each signature input present and
// readable by Tensor::FromProto (TF's texts), output_filter, then the
// dtypes the session would refuse. Every input goes as
// raw_input_contents, read with TF's rules (tfgrpc.TensorProto); a
// scalar goes with shape [1], which Triton needs (it counts [] as no
// element), as the REST pipeline sends it.
//
// Errors are *apierr.Error with TF's code (Status turns them into the
// gRPC status).
func PredictRequest(dst, msg []byte, resolve Resolver, opt Options) ([]byte, *Exchange, error) {
	req, err := tfgrpc.DecodePredictRequest(msg)
	if err != nil {
		return nil, nil, errParse(err)
	}
	sigName := req.Spec.SignatureName
	if sigName == "" {
		sigName = DefaultSignature
	}
	r, target, err := findSpec(req.HasSpec, &req.Spec, route.Predict, sigName, resolve)
	if err != nil {
		if errors.Is(err, ErrUnknownSignature) {
			return nil, nil, apierr.Wrap(apierr.FailedPrecondition, err, `Serving signature key "`+sigName+`" not found.`)
		}
		return nil, nil, err
	}
	ex := &Exchange{Method: Predict, Route: r, SignatureName: sigName, Target: target, V2Path: V2ModelInfer}
	sig := target.Signature
	checked := sig != nil && len(sig.Inputs) > 0
	var inputs []predictInput
	if checked {
		inputs, err = signatureInputs(req, sig, opt)
	} else {
		inputs, err = requestInputs(req, opt)
	}
	if err != nil {
		return nil, nil, err
	}
	if checked {
		if ex.Outputs, err = outputFilter(req.OutputFilter, sig); err != nil {
			return nil, nil, err
		}
		if err := checkDTypes(inputs, sig); err != nil {
			return nil, nil, err
		}
	} else if len(req.OutputFilter) > 0 {
		ex.Outputs = req.OutputFilter
	}
	total, elems := int64(0), int64(0)
	for i := range inputs {
		in := &inputs[i]
		if in.dt == tensor.BF16 && opt.Kind != oip.Triton {
			return nil, nil, apierr.InvalidArgumentf("input '%s' has datatype BF16, which the %s server does not support", in.alias, kindTitle(opt.Kind))
		}
		if elems += in.n; elems > opt.Limits.OrDefault().MaxElements {
			return nil, nil, tooManyElements(opt)
		}
		if total += in.size; total > opt.maxBytes() {
			return nil, nil, tooLarge("ModelInferRequest", opt)
		}
	}
	return appendInfer(dst, ex, inputs, opt), ex, nil
}

// signatureInputs is VerifyRequestInputsSize and GetInputValues: the
// request's inputs in signature order, each read as FromProto would.
func signatureInputs(req *tfgrpc.PredictRequest, sig *tensor.Signature, opt Options) ([]predictInput, error) {
	sentName := func(i int) string { return req.Inputs[i].Name }
	if len(req.Inputs) != len(sig.Inputs) {
		sent, w := tensor.NameSet(len(req.Inputs), sentName), tensor.NameSet(len(sig.Inputs), func(i int) string { return sig.Inputs[i].Name })
		return nil, apierr.InvalidArgumentf("input size does not match signature: %d!=%d len({%s}) != len({%s}). Sent extra: {%s}. Missing but required: {%s}.",
			len(req.Inputs), len(sig.Inputs), strings.Join(sent, ","), strings.Join(w, ","),
			strings.Join(tensor.SetDifference(sent, w), ","), strings.Join(tensor.SetDifference(w, sent), ","))
	}
	byName := make(map[string]*tfgrpc.TensorProto, len(req.Inputs))
	for i := range req.Inputs {
		byName[req.Inputs[i].Name] = &req.Inputs[i].Tensor
	}
	inputs := make([]predictInput, 0, len(sig.Inputs))
	for _, spec := range sig.Inputs {
		tp, ok := byName[spec.Name]
		if !ok {
			return nil, apierr.InvalidArgumentf("Signature input alias: %s(feed name: %s:0) not found in request and no default value provided. Inputs expected to be in the request {%s}, or default input alias set: ",
				spec.Name, spec.Name, strings.Join(tensor.NameSet(len(req.Inputs), sentName), ","))
		}
		in, err := readInput(spec.Name, tp, opt)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, in)
	}
	return inputs, nil
}

// requestInputs is the request's inputs as sent, for a model whose
// signature v2 metadata does not give.
func requestInputs(req *tfgrpc.PredictRequest, opt Options) ([]predictInput, error) {
	inputs := make([]predictInput, 0, len(req.Inputs))
	for i := range req.Inputs {
		in, err := readInput(req.Inputs[i].Name, &req.Inputs[i].Tensor, opt)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, in)
	}
	return inputs, nil
}

// readInput is Tensor::FromProto: the shape, the dtype, then the values
// (tensor_content's size, its string list, its bools), with the element
// count bounded first (a shape is free to send, the tensor it names is
// not: TF would allocate it).
func readInput(alias string, tp *tfgrpc.TensorProto, opt Options) (predictInput, error) {
	dt, n, err := tp.Check()
	switch {
	case errors.Is(err, tfgrpc.ErrNoV2):
		return predictInput{}, apierr.Wrap(apierr.Unimplemented, err,
			"input '"+alias+"' has TensorFlow dtype "+strconv.Itoa(int(tp.DType))+", which the v2 inference protocol has no datatype for")
	case err != nil:
		return predictInput{}, apierr.Wrap(apierr.InvalidArgument, err, "tensor parsing error: "+alias)
	case n > opt.Limits.OrDefault().MaxElements:
		return predictInput{}, tooManyElements(opt)
	}
	size, err := tp.RawSize(dt, n)
	if err != nil {
		return predictInput{}, apierr.Wrap(apierr.InvalidArgument, err, "tensor parsing error: "+alias)
	}
	return predictInput{alias: alias, tp: tp, dt: dt, n: n, size: size}, nil
}

func tooManyElements(opt Options) error {
	return apierr.Errorf(apierr.ResourceExhausted, "request has more than %d tensor elements", opt.Limits.OrDefault().MaxElements)
}

// outputFilter checks output_filter against the signature's outputs (TF's
// PreProcessPrediction) and returns it, nil when empty (all outputs).
func outputFilter(filter []string, sig *tensor.Signature) ([]string, error) {
	if len(filter) == 0 {
		return nil, nil
	}
	seen := make(map[string]bool, len(filter))
	for _, alias := range filter {
		if _, ok := sig.Output(alias); !ok {
			names := tensor.NameSet(len(sig.Outputs), func(i int) string { return sig.Outputs[i].Name })
			return nil, apierr.InvalidArgumentf("output tensor alias not found in signature: %s Outputs expected to be in the set {%s}.", alias, strings.Join(names, ","))
		}
		if seen[alias] {
			return nil, apierr.InvalidArgumentf("duplicate output tensor alias: %s", alias)
		}
		seen[alias] = true
	}
	return filter, nil
}

// checkDTypes is the session's argument check (FunctionCallFrame::SetArgs):
// the first input, in the order of the sorted feed names, whose dtype is
// not the signature's. The feed names are invented ("alias:0", as the
// metadata answer shows them), so the index is TF's when the graph's
// names sort like the aliases (docs/grpc.md §9 question 3).
func checkDTypes(inputs []predictInput, sig *tensor.Signature) error {
	order := make([]int, len(inputs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(inputs[a].alias+":0", inputs[b].alias+":0") })
	for arg, i := range order {
		spec, _ := sig.Input(inputs[i].alias)
		if spec.DataType != inputs[i].dt {
			return apierr.InvalidArgumentf("Expects arg[%d] to be %s but %s is provided", arg, spec.DataType.TFShortName(), inputs[i].dt.TFShortName())
		}
	}
	return nil
}

// appendInfer writes the ModelInferRequest: the inputs (v2 names) with
// their raw contents, the requested outputs (v2 names).
func appendInfer(dst []byte, ex *Exchange, inputs []predictInput, opt Options) []byte {
	model, version := ex.v2Model()
	sig := ex.Target.Signature
	wire := sig.OnWire()
	ins := make([]oipgrpc.Input, len(inputs))
	for i := range inputs {
		in := &inputs[i]
		name := in.alias
		shape := in.tp.Shape
		if sig != nil {
			name = toWire(name, sig.Inputs, wire.Inputs)
		}
		if len(shape) == 0 {
			shape = []int64{1}
		}
		ins[i] = oipgrpc.Input{Name: name, DataType: in.dt, Shape: shape, Size: int(in.size)}
	}
	var outs []string
	for _, o := range ex.Outputs {
		if sig != nil {
			o = toWire(o, sig.Outputs, wire.Outputs)
		}
		outs = append(outs, o)
	}
	return oipgrpc.AppendInferRequest(dst, oipgrpc.Head{ModelName: model, ModelVersion: version, ID: opt.ID}, ins, outs,
		func(dst []byte, i int) []byte { return inputs[i].tp.AppendRaw(dst, inputs[i].dt, inputs[i].n) })
}

// PredictResponse translates the ModelInferResponse answering a request
// PredictRequest made into a PredictResponse appended to dst: the outputs
// asked for (output_filter, else every signature output, else every
// output the server sent), named in TF's names, in the encoding of
// opt.Encoding, and model_spec {name, version, signature}. An output the
// server did not send is TF's UNKNOWN "Predict internal error" (its
// output count check).
func PredictResponse(dst, msg []byte, ex *Exchange, opt Options) ([]byte, error) {
	resp, err := oipgrpc.DecodeInferResponse(msg, opt.Limits)
	if err != nil {
		return nil, err
	}
	outputs := tfNames(resp.Tensors, ex.Target.Signature)
	var want []string
	switch {
	case len(ex.Outputs) > 0:
		want = ex.Outputs
	case ex.Target.Signature != nil && len(ex.Target.Signature.Outputs) > 0:
		for _, o := range ex.Target.Signature.Outputs {
			want = append(want, o.Name)
		}
	}
	if want != nil {
		picked := make([]tensor.Tensor, 0, len(want))
		for _, name := range want {
			i := slices.IndexFunc(outputs, func(t tensor.Tensor) bool { return t.Name == name })
			if i < 0 {
				return nil, apierr.New(apierr.Unknown, "Predict internal error")
			}
			picked = append(picked, outputs[i])
		}
		outputs = picked
	}
	slices.SortStableFunc(outputs, func(a, b tensor.Tensor) int { return strings.Compare(a.Name, b.Name) })
	spec := ex.spec(true, resp.ModelVersion, nil, opt)
	size := int64(tfgrpc.SizePredictResponse(outputs, spec, opt.Encoding))
	if size > opt.maxBytes() {
		return nil, tooLarge("PredictResponse", opt)
	}
	return tfgrpc.AppendPredictResponse(dst, outputs, spec, opt.Encoding), nil
}

// tfNames renames decoded v2 outputs to their TF names and, as the REST
// decoder does, reports an output the signature declares of rank 1 that
// came back [N,1] as [N] (MLServer's numpy codec reshapes 1-D outputs).
func tfNames(outputs []tensor.Tensor, sig *tensor.Signature) []tensor.Tensor {
	if sig == nil {
		return outputs
	}
	for i := range outputs {
		o := &outputs[i]
		if sig.Wire != nil {
			o.Name = fromWire(o.Name, sig.Outputs, sig.Wire.Outputs)
		}
		if spec, ok := sig.Output(o.Name); ok && len(spec.Shape) == 1 && len(o.Shape) == 2 && o.Shape[1] == 1 {
			o.Shape = o.Shape[:1:1]
		}
	}
	return outputs
}

func tooLarge(what string, opt Options) error {
	return apierr.Errorf(apierr.ResourceExhausted, "%s larger than the limit of %d bytes", what, opt.maxBytes())
}

func kindTitle(k oip.ServerKind) string {
	switch k {
	case oip.KServe:
		return "KServe"
	case oip.MLServer:
		return "MLServer"
	}
	return "Triton"
}
