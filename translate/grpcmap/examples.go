package grpcmap

import (
	"errors"
	"slices"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oipgrpc"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfexample"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// ExamplesRequest translates a ClassificationRequest (m Classify) or
// RegressionRequest (m Regress) into a ModelInferRequest appended to dst,
// checking as TF Serving's RunClassify / RunRegress: model spec, the
// signature (INVALID_ARGUMENT "No signature was found with the name: S"),
// that it is a classification or regression signature
// (tfexample.CheckSignature, the REST texts), then that the input holds
// examples ("Input is empty."). The serialized tf.Examples pass through
// as the BYTES input "inputs" (tfexample.InputShape), the context's bytes
// in front of each example's when the request has one.
func ExamplesRequest(dst, msg []byte, m tfexample.Method, resolve Resolver, opt Options) ([]byte, *Exchange, error) {
	req, ok, err := tfgrpc.DecodeExamplesRequest(msg, opt.maxBytes())
	if err != nil {
		return nil, nil, errParse(err)
	}
	if !ok {
		return nil, nil, tooLarge("ModelInferRequest", opt)
	}
	method, verb := Classify, route.Classify
	if m == tfexample.Regress {
		method, verb = Regress, route.Regress
	}
	sigName := req.Spec.SignatureName
	if sigName == "" {
		sigName = DefaultSignature
	}
	r, target, err := findSpec(req.HasSpec, &req.Spec, verb, sigName, resolve)
	if err != nil {
		if errors.Is(err, ErrUnknownSignature) {
			return nil, nil, apierr.Wrap(apierr.InvalidArgument, err, "No signature was found with the name: "+sigName)
		}
		return nil, nil, err
	}
	if err := tfexample.CheckSignature(target.Signature, m); err != nil {
		return nil, nil, err
	}
	n := len(req.Examples)
	if n == 0 {
		return nil, nil, apierr.New(apierr.InvalidArgument, "Input is empty.")
	}
	if int64(n) > opt.Limits.OrDefault().MaxElements {
		return nil, nil, tooManyElements(opt)
	}
	ex := &Exchange{Method: method, Route: r, SignatureName: sigName, Target: target, Examples: n, V2Path: V2ModelInfer}
	sig := target.Signature
	input := tensor.Tensor{
		Name:     toWire(tfexample.InputName, sig.Inputs, sig.OnWire().Inputs),
		DataType: tensor.Bytes,
		Shape:    tfexample.InputShape(sig, n),
		Strings:  req.Examples,
	}
	model, version := ex.v2Model()
	return oipgrpc.AppendInferRequestTensors(dst, oipgrpc.Head{ModelName: model, ModelVersion: version, ID: opt.ID}, []tensor.Tensor{input}, nil), ex, nil
}

// ExamplesResponse translates the ModelInferResponse answering a request
// ExamplesRequest made into TF's ClassificationResponse or
// RegressionResponse, after TF Serving's checks of the outputs (the REST
// pipeline's: tfresponse.NewClassify / NewRegress): for classify the
// "classes" (BYTES [N,K]) and "scores" (FP32 [N,K]) outputs the signature
// declares, labels "" and scores 0 for the one it lacks; for regress
// "outputs" (FP32 [N] or [N,1]).
func ExamplesResponse(dst, msg []byte, ex *Exchange, opt Options) ([]byte, error) {
	if ex.Target.Signature == nil {
		// ExamplesRequest never makes such an Exchange.
		return nil, apierr.New(apierr.Internal, "classify or regress exchange without a signature")
	}
	resp, err := oipgrpc.DecodeInferResponse(msg, opt.Limits)
	if err != nil {
		return nil, err
	}
	outputs := tfNames(resp.Tensors, ex.Target.Signature)
	spec := ex.spec(true, resp.ModelVersion, nil, opt)
	find := func(name string) int {
		return slices.IndexFunc(outputs, func(t tensor.Tensor) bool { return t.Name == name })
	}
	if ex.Method == Regress {
		i := find(tfexample.OutputsName)
		if i < 0 {
			return nil, apierr.InvalidArgumentf("Expected output_tensors and output_tensor_names to have the same size.")
		}
		body, err := tfresponse.NewRegress(outputs, i, ex.Examples)
		if err != nil {
			return nil, err
		}
		body.Release()
		if size := int64(ex.Examples) * 8; size > opt.maxBytes() {
			return nil, tooLarge("RegressionResponse", opt)
		}
		return tfgrpc.AppendRegressionResponse(dst, &outputs[i], ex.Examples, spec), nil
	}
	classes, scores := -1, -1
	wanted, got := 0, 0
	for _, name := range []string{tfexample.ClassesName, tfexample.ScoresName} {
		if _, ok := ex.Target.Signature.Output(name); !ok {
			continue
		}
		wanted++
		if i := find(name); i >= 0 {
			got++
			if name == tfexample.ClassesName {
				classes = i
			} else {
				scores = i
			}
		}
	}
	if got != wanted {
		return nil, apierr.InvalidArgumentf("Expected %d output tensor(s).  Got: %d", wanted, got)
	}
	body, err := tfresponse.NewClassify(outputs, classes, scores, ex.Examples)
	if err != nil {
		return nil, err
	}
	body.Release()
	var ct, st *tensor.Tensor
	k := 0
	if classes >= 0 {
		ct, k = &outputs[classes], int(outputs[classes].Shape[1])
	}
	if scores >= 0 {
		st, k = &outputs[scores], int(outputs[scores].Shape[1])
	}
	// Each class costs at most its label, 5 bytes of score and 11 of
	// headers.
	size := int64(ex.Examples) * int64(k) * 16
	if ct != nil {
		size += int64(oipgrpc.RawSize(ct))
	}
	if size > opt.maxBytes() {
		return nil, tooLarge("ClassificationResponse", opt)
	}
	return tfgrpc.AppendClassificationResponse(dst, ct, st, ex.Examples, k, spec), nil
}
