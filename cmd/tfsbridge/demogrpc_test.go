package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tfsbridge/tfsbridge/translate/oipgrpc"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// bytesCodec carries messages as raw bytes (the test builds them with oipgrpc).
type bytesCodec struct{}

func (bytesCodec) Name() string { return "" }
func (bytesCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.([]byte); ok {
		return b, nil
	}
	return nil, fmt.Errorf("cannot marshal %T", v)
}
func (bytesCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}

// TestDemoGRPC: the demo serves the mock's v2 gRPC port it prints, and prints a TF
// Serving Python client for the TF gRPC port.
func TestDemoGRPC(t *testing.T) {
	out := startDemo(t, "").out
	for _, want := range []string{`grpc.insecure_channel("localhost:`, `tf.make_tensor_proto([1.0, 2.0, 5.0], dtype=tf.float32)`, "pip install tensorflow-serving-api"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	m := regexp.MustCompile(`inference\.GRPCInferenceService \(triton\) on (\S+)\.`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no mock gRPC address in:\n%s", out)
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodec(bytesCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	x := make([]byte, 0, 12)
	for _, v := range []float32{1, 2, 5} {
		x = binary.LittleEndian.AppendUint32(x, math.Float32bits(v))
	}
	req := oipgrpc.AppendInferRequestTensors(nil, oipgrpc.Head{ModelName: "half_plus_two"}, []tensor.Tensor{{Name: "x", DataType: tensor.FP32, Shape: []int64{3}, Data: x}}, nil)
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second) // a bound for a hang
	defer stop()
	var resp []byte
	if err := conn.Invoke(ctx, "/inference.GRPCInferenceService/ModelInfer", req, &resp); err != nil {
		t.Fatal(err)
	}
	msg, err := oipgrpc.DecodeInferResponse(resp, tensor.DefaultLimits)
	if err != nil || len(msg.Tensors) != 1 {
		t.Fatalf("%+v %v", msg, err)
	}
	y := msg.Tensors[0].Data
	var got []float32
	for i := 0; i+4 <= len(y); i += 4 {
		got = append(got, math.Float32frombits(binary.LittleEndian.Uint32(y[i:])))
	}
	if fmt.Sprint(got) != "[2.5 3 4.5]" {
		t.Errorf("y = %v", got)
	}
}
