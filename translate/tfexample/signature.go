package tfexample

import (
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Method is the TF Serving verb of an examples request.
type Method uint8

// The verbs that take tf.Examples.
const (
	Classify Method = iota + 1
	Regress
)

// The tensor names of TF's classification and regression signatures
// (tensorflow/python/saved_model/signature_constants.py): what an Estimator
// export, and so the v2 model serving it, calls them.
const (
	InputName   = "inputs"
	ClassesName = "classes"
	ScoresName  = "scores"
	OutputsName = "outputs"
)

// TF's method names (signature_constants.py), which its errors print.
const (
	methodClassify = "tensorflow/serving/classify"
	methodRegress  = "tensorflow/serving/regress"
	methodPredict  = "tensorflow/serving/predict"
)

// CheckSignature checks that the model behind sig can answer m, as TF
// Serving's GetClassificationSignatureDef / GetRegressionSignatureDef and
// PreProcessClassification / PreProcessRegression check a SignatureDef.
//
// A v2 model has no method name, so it is read from the tensors: a model
// with one BYTES input "inputs" and a "classes" or "scores" output is a
// classification signature, one with an "outputs" output a regression
// signature, anything else a predict signature. Calling a verb on a model
// of another method is TF's "Expected classification signature
// method_name to be tensorflow/serving/classify. Was: …" (400); so is a
// model whose "inputs" is not BYTES, which could not take serialized
// examples. Output datatypes and shapes are checked on the tensors the
// model returns (tfresponse.NewClassify and NewRegress), as TF Serving does.
func CheckSignature(sig *tensor.Signature, m Method) error {
	want, verb := methodClassify, "classification"
	if m == Regress {
		want, verb = methodRegress, "regression"
	}
	if !serves(sig, m) {
		return apierr.InvalidArgumentf("Expected %s signature method_name to be %s. Was: %s", verb, want, methodOf(sig))
	}
	if len(sig.Inputs) != 1 {
		return apierr.InvalidArgumentf("Expected one input Tensor.")
	}
	return nil
}

// serves reports whether sig has the tensors of m's signature: the BYTES
// input "inputs" and, for Classify, a "classes" or "scores" output, for
// Regress an "outputs" output (a model may have both kinds).
func serves(sig *tensor.Signature, m Method) bool {
	if sig == nil {
		return false
	}
	if in, ok := sig.Input(InputName); !ok || in.DataType != tensor.Bytes {
		return false
	}
	if m == Regress {
		_, ok := sig.Output(OutputsName)
		return ok
	}
	_, classes := sig.Output(ClassesName)
	_, scores := sig.Output(ScoresName)
	return classes || scores
}

// methodOf is the TF method name a SignatureDef with sig's tensors would
// carry.
func methodOf(sig *tensor.Signature) string {
	switch {
	case serves(sig, Classify):
		return methodClassify
	case serves(sig, Regress):
		return methodRegress
	}
	return methodPredict
}

// InputShape is the shape of the BYTES input for n examples: [n], or
// [n, 1] for a model that declares "inputs" with a trailing dimension of 1
// (a Triton config with batching and dims [1]).
func InputShape(sig *tensor.Signature, n int) []int64 {
	if in, ok := sig.Input(InputName); ok && len(in.Shape) == 2 && (in.Shape[1] == 1 || in.Shape[1] == -1) {
		return []int64{int64(n), 1}
	}
	return []int64{int64(n)}
}
