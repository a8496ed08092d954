package e2e

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/test/envoysim"
	"github.com/tfsbridge/tfsbridge/test/internal/tfclient"
)

// grpcTestMap is testMap for TF gRPC clients: labels and a signature on
// another v2 model, renames both ways, a model on a second server with a
// grpc: address, and one on a server without it.
const grpcTestMap = `
servers:
  second:   {url: "{{second}}", kind: mlserver, grpc: "{{secondgrpc}}"}
  restonly: {url: "{{second}}", kind: mlserver}
models:
  hpt:
    model: half_plus_two
    labels: {stable: 1, canary: 7}
    signatures:
      times_two: {model: half_times_two}
  mo:
    model: multi_out
    inputs: {pair: x}
    outputs: {total: sum, best: argmax}
  remote:
    server: second
    model: half_plus_two
    labels: {stable: 1}
  stranded:
    server: restonly
    model: half_plus_two
`

// secondOffset is what the second server adds to half_plus_two's
// answers (mockv2.Options.Perturb), so that a test sees which server
// answered from the values alone.
const secondOffset = 100

// TestGRPCModelMap: the model map applies to TF gRPC clients as to REST
// ones, through every transport: labels to versions, a signature served
// by another v2 model, tensor renames both ways (Predict and
// GetModelMetadata), and a model on a second v2 server reached at the
// map's grpc: address — behind Envoy through the x-tfsbridge-server route,
// from the proxy listener directly.
func TestGRPCModelMap(t *testing.T) {
	secondURL, secondGRPC := startMockV2(t, mockv2.Options{Kind: mlserver, Perturb: map[string]float64{"half_plus_two": secondOffset}})
	doc := strings.NewReplacer("{{second}}", secondURL, "{{secondgrpc}}", secondGRPC).Replace(grpcTestMap)
	st := newGRPCStackWith(t, triton, grpcStackOptions{ModelMap: doc,
		Routes: []envoysim.HeaderRoute{{Header: "x-tfsbridge-server", Value: "second", Upstream: "http://" + secondGRPC}}})

	x := map[string]tfclient.TensorProto{"x": tfclient.Float32([]int64{3}, 1, 2, 5)}
	for _, via := range grpcTransports {
		t.Run(via, func(t *testing.T) {
			c := st.clients[via]
			ctx := callContext(t)
			predict := func(spec tfclient.ModelSpec, in map[string]tfclient.TensorProto) *tfclient.PredictResponse {
				t.Helper()
				p, err := c.Predict(ctx, tfclient.PredictRequest(spec, in))
				if err != nil {
					t.Fatalf("Predict %+v: %v", spec, err)
				}
				return p
			}

			p := predict(tfclient.ModelSpec{Name: "hpt", Label: "stable"}, x)
			if y := p.Outputs["y"].FloatVal; !slices.Equal(y, []float32{2.5, 3, 4.5}) || p.ModelSpec.Name != "hpt" ||
				p.ModelSpec.Version == nil || *p.ModelSpec.Version != 1 {
				t.Errorf("hpt by label: %+v", p)
			}

			// half_times_two (FP16 [-1,4]): make_tensor_proto of a float16
			// [1,4] array is tensor_content; the answer is half_val.
			half := tfclient.TensorProto{DType: tfclient.DTHalf, Shape: []int64{1, 4},
				TensorContent: []byte{0x00, 0x3c, 0x00, 0x40, 0x00, 0x42, 0x00, 0x44}} // 1, 2, 3, 4
			p = predict(tfclient.ModelSpec{Name: "hpt", SignatureName: "times_two"}, map[string]tfclient.TensorProto{"x": half})
			if y := p.Outputs["y"]; y.DType != tfclient.DTHalf || !slices.Equal(y.HalfVal, []int32{0x4000, 0x4400, 0x4600, 0x4800}) ||
				p.ModelSpec.SignatureName != "times_two" || p.ModelSpec.Name != "hpt" {
				t.Errorf("hpt's times_two: %+v", p)
			}

			p = predict(tfclient.Spec("mo"), map[string]tfclient.TensorProto{"pair": tfclient.Float32([]int64{2, 2}, 1, 2, 4, 3)})
			if _, ok := p.Outputs["sum"]; ok || !slices.Equal(p.Outputs["total"].FloatVal, []float32{3, 7}) ||
				!slices.Equal(p.Outputs["best"].Int64Val, []int64{1, 0}) || len(p.Outputs["label_bytes"].StringVal) != 2 {
				t.Errorf("mo, renamed: %+v", p)
			}
			md, err := c.GetModelMetadata(ctx, tfclient.GetModelMetadataRequest(tfclient.Spec("mo"), "signature_def"))
			if err != nil {
				t.Fatalf("mo metadata: %v", err)
			}
			sig := md.SignatureDefs["serving_default"]
			if _, ok := sig.Inputs["pair"]; !ok || len(sig.Inputs) != 1 || sig.Outputs["total"].DType != tfclient.DTFloat ||
				sig.Outputs["best"].DType != tfclient.DTInt64 || md.ModelSpec.Name != "mo" {
				t.Errorf("mo metadata: %+v", md)
			}
			md, err = c.GetModelMetadata(ctx, tfclient.GetModelMetadataRequest(tfclient.Spec("hpt"), "signature_def"))
			if err != nil || len(md.SignatureDefs) != 2 || md.SignatureDefs["times_two"].Inputs["x"].DType != tfclient.DTHalf ||
				md.SignatureDefs["times_two"].MethodName != "tensorflow/serving/predict" || md.SignatureDefs["serving_default"].Inputs["x"].DType != tfclient.DTFloat {
				t.Errorf("hpt metadata: %+v %v", md, err)
			}

			// The second server, at its grpc: address: its answers are
			// secondOffset higher.
			p = predict(tfclient.ModelSpec{Name: "remote", Label: "stable"}, x)
			if y := p.Outputs["y"].FloatVal; !slices.Equal(y, []float32{2.5 + secondOffset, 3 + secondOffset, 4.5 + secondOffset}) || p.ModelSpec.Name != "remote" {
				t.Errorf("remote: %+v (want the second server's answer)", p)
			}
			vs, err := c.GetModelStatus(ctx, tfclient.GetModelStatusRequest(tfclient.Spec("remote").WithVersion(1)))
			if err != nil || len(vs) != 1 || vs[0].Version != 1 || vs[0].State != 30 {
				t.Errorf("remote status: %+v %v", vs, err)
			}

			for _, e := range []struct {
				name string
				spec tfclient.ModelSpec
				code codes.Code
				msg  string
			}{
				{"label to a missing version names the TF model", tfclient.ModelSpec{Name: "hpt", Label: "canary"},
					codes.NotFound, "Servable not found for request: Specific(hpt, 7)"},
				{"unknown label", tfclient.ModelSpec{Name: "hpt", Label: "nope"},
					codes.InvalidArgument, "Unrecognized servable version label: nope"},
				{"unknown signature", tfclient.ModelSpec{Name: "hpt", SignatureName: "predict_images"},
					codes.FailedPrecondition, `Serving signature key "predict_images" not found.`},
			} {
				_, err := c.Predict(ctx, tfclient.PredictRequest(e.spec, x))
				if st, _ := status.FromError(err); st.Code() != e.code || st.Message() != e.msg {
					t.Errorf("%s: %v %q, want %v %q", e.name, st.Code(), st.Message(), e.code, e.msg)
				}
			}
			if via == "proxy-grpc" {
				// Behind Envoy, the route configuration decides where a
				// server without a gRPC route goes (deploy/ refuses it).
				_, err := c.Predict(ctx, tfclient.PredictRequest(tfclient.Spec("stranded"), x))
				want := `The model map's server "restonly" has no grpc address: tfsbridge cannot call it over gRPC`
				if st, _ := status.FromError(err); st.Code() != codes.Unavailable || st.Message() != want {
					t.Errorf("stranded: %v %q, want UNAVAILABLE %q", st.Code(), st.Message(), want)
				}
			}
		})
	}
}
