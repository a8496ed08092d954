package grpcproto

import "testing"

func TestLoad(t *testing.T) {
	_ = New("tensorflow.serving.PredictRequest")
	_ = New("inference.ModelInferResponse")
}
