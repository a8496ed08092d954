package translate

import "github.com/tfsbridge/tfsbridge/translate/tensor"

// PredictOutputs is the predict pipeline's response side short of the
// writing: the v2 answer decoded as Response decodes it, then
// RestoreBatch. These are the outputs Response writes the TF answer
// from, in ex.Format (the shadow comparison compares two answers on
// them, tfcompare.ComparePredict, without writing either). They alias
// v2Body. Errors are Response's decoding errors; what only the writer
// checks (row format's batch sizes, the body's size bound) is not
// checked.
func PredictOutputs(v2Body []byte, headerLength int, ex Exchange, lim tensor.Limits) ([]tensor.Tensor, error) {
	outputs, err := decodeOutputs(v2Body, headerLength, ex, lim)
	if err != nil {
		return nil, err
	}
	RestoreBatch(outputs, ex)
	return outputs, nil
}

// RestoreBatch is what predict's response side does to the decoded
// outputs before writing them: when ex.Unbatched, a leading dimension of
// 1 put back on every output (new shape slices; the old ones are not
// written to).
func RestoreBatch(outputs []tensor.Tensor, ex Exchange) {
	if ex.Unbatched {
		rebatch(outputs)
	}
}
