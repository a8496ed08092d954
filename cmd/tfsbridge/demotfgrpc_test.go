package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

// TestDemoTFGRPC calls the demo's TF gRPC listener as the printed Python
// client does: Predict on half_plus_two with make_tensor_proto's bytes for
// [1.0, 2.0, 5.0], answered in float_val through the mock's gRPC port.
func TestDemoTFGRPC(t *testing.T) {
	out := startDemo(t, "").out
	m := regexp.MustCompile(`grpc\.insecure_channel\("([^"]+)"\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no TF gRPC address in:\n%s", out)
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodec(bytesCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// make_tensor_proto([1.0, 2.0, 5.0], dtype=tf.float32): dtype, shape
	// [3], tensor_content.
	tp := []byte{0x08, 0x01, 0x12, 0x04, 0x12, 0x02, 0x08, 0x03, 0x22, 0x0c, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0xa0, 0x40}
	var entry, req []byte
	entry = protowire.AppendBytes(protowire.AppendTag(entry, 1, protowire.BytesType), []byte("x"))
	entry = protowire.AppendBytes(protowire.AppendTag(entry, 2, protowire.BytesType), tp)
	req = protowire.AppendBytes(protowire.AppendTag(req, 1, protowire.BytesType), tfgrpc.AppendModelSpec(nil, tfgrpc.ModelSpec{Name: "half_plus_two"}))
	req = protowire.AppendBytes(protowire.AppendTag(req, 2, protowire.BytesType), entry)
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second) // a bound for a hang
	defer stop()
	var resp []byte
	if err := conn.Invoke(ctx, "/tensorflow.serving.PredictionService/Predict", req, &resp); err != nil {
		t.Fatal(err)
	}
	want := tfgrpc.AppendPredictResponse(nil, []tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{3},
		Data: []byte{0, 0, 0x20, 0x40, 0, 0, 0x40, 0x40, 0, 0, 0x90, 0x40}}},
		tfgrpc.ModelSpec{Name: "half_plus_two", Version: 1, HasVersion: true, SignatureName: "serving_default"}, tfgrpc.TypedFields)
	if !bytes.Equal(resp, want) {
		t.Errorf("PredictResponse % x\nwant % x", resp, want)
	}
}
