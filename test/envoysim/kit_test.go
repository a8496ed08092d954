package envoysim

import (
	"context"
	"encoding/binary"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/test/internal/tfclient"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/grpcmap"
	tfroute "github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// The gRPC kit together: a TF Serving client (tfclient) through the stand-in (h2c both
// ways, GRPCMode) to the mock's v2 gRPC service, with a minimal BUFFERED processor built on
// the pure translation (translate/grpcmap) standing in for tfsbridge's own. It shows the
// pieces fit (and how a processor uses them); tfsbridge's ext_proc is tested with them in
// its own packages.

// grpcmapProcessor translates one TF gRPC call per stream: the request body becomes the v2
// message and :path the v2 method (on the body reply: the headers are held in BUFFERED), a
// refusal an immediate_response with grpc_status, the v2 answer body the TF answer.
func grpcmapProcessor(resolve grpcmap.Resolver) func() responder {
	return func() responder {
		var method grpcmap.Method
		var ex *grpcmap.Exchange
		refuse := func(err error) []*extprocv3.ProcessingResponse {
			code, msg := grpcmap.Status(err)
			return one(immediate(&extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: 200},
				GrpcStatus: &extprocv3.GrpcStatus{Status: uint32(code)}, Body: []byte(msg)}))
		}
		// frame turns a message appended after 5 reserved bytes into a gRPC frame.
		frame := func(b []byte) []byte {
			b[0] = 0
			binary.BigEndian.PutUint32(b[1:5], uint32(len(b)-5))
			return b
		}
		return func(n int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			switch kindOf(req) {
			case "request_headers":
				path, _ := hget(req.GetRequestHeaders().GetHeaders(), ":path")
				m, ok := grpcmap.ParseMethod(path)
				if !ok {
					return refuse(apierr.New(apierr.Unimplemented, "unknown method "+path))
				}
				method = m
			case "request_body":
				body := req.GetRequestBody().GetBody()
				if len(body) < 5 || body[0] != 0 {
					return refuse(apierr.New(apierr.Internal, "one uncompressed message expected"))
				}
				v2, x, err := grpcmap.Request(make([]byte, 5, 5+len(body)), method, body[5:], resolve, grpcmap.Options{})
				if err != nil {
					return refuse(err)
				}
				ex = x
				return one(common(req, &extprocv3.CommonResponse{
					HeaderMutation: setHeaders(raw(":path", x.V2Path)),
					BodyMutation:   newBody(string(frame(v2))),
				}))
			case "response_body":
				body := req.GetResponseBody().GetBody()
				if ex == nil || len(body) < 5 {
					break
				}
				tf, err := grpcmap.Response(make([]byte, 5), body[5:], ex, grpcmap.Options{})
				if err != nil {
					return refuse(err)
				}
				return one(common(req, &extprocv3.CommonResponse{BodyMutation: newBody(string(frame(tf)))}))
			}
			return passThrough(n, req)
		}
	}
}

// halfPlusTwo resolves the mock's half_plus_two as its Triton metadata describes it.
func halfPlusTwo(r tfroute.Route, signature string) (grpcmap.Target, error) {
	if r.Model != "half_plus_two" {
		return grpcmap.Target{}, apierr.New(apierr.NotFound, "Servable not found for request: "+r.Servable())
	}
	if signature != "" && signature != grpcmap.DefaultSignature {
		return grpcmap.Target{}, grpcmap.ErrUnknownSignature
	}
	return grpcmap.Target{Signature: &tensor.Signature{
		Model: "half_plus_two", Versions: []string{"1"}, Platform: "tensorflow_savedmodel",
		Inputs:  []tensor.Spec{{Name: "x", DataType: tensor.FP32, Shape: []int64{-1}}},
		Outputs: []tensor.Spec{{Name: "y", DataType: tensor.FP32, Shape: []int64{-1}}},
	}}, nil
}

func TestGRPCKit(t *testing.T) {
	for _, kind := range []string{"triton", "kserve", "mlserver"} {
		t.Run(kind, func(t *testing.T) { checkGRPCKit(t, kind) })
	}
}

func checkGRPCKit(t *testing.T, kind string) {
	mock, err := mockv2.New(mockv2.Options{Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := mock.NewGRPCServer()
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	grpcUpstreams.add(t, gs)

	proc := &procServer{perStream: grpcmapProcessor(halfPlusTwo)}
	ev, _ := grpcEnv(t, Config{Upstream: "http://" + lis.Addr().String()}, proc)
	c, err := tfclient.Dial(strings.TrimPrefix(ev.envoy.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a bound for a hang
	defer cancel()

	// make_tensor_proto([1.0, 2.0, 5.0], dtype=tf.float32): tensor_content.
	resp, err := c.Predict(ctx, tfclient.PredictRequest(tfclient.Spec("half_plus_two"),
		map[string]tfclient.TensorProto{"x": tfclient.Float32([]int64{3}, 1, 2, 5)}))
	if err != nil {
		t.Fatal(err)
	}
	y := resp.Outputs["y"]
	if y.DType != tfclient.DTFloat || !reflect.DeepEqual(y.Shape, []int64{3}) || !reflect.DeepEqual(y.FloatVal, []float32{2.5, 3, 4.5}) {
		t.Errorf("y = %+v, want float_val [2.5 3 4.5]", y)
	}
	// Triton and MLServer name version "1"; KServe names none, and without a configured
	// default TF's answer then has no version (docs/grpc.md §9).
	wantVersion := kind != "kserve"
	if s := resp.ModelSpec; s.Name != "half_plus_two" || (s.Version != nil) != wantVersion || (wantVersion && *s.Version != 1) || s.SignatureName != "serving_default" {
		t.Errorf("model_spec %+v (version wanted: %v)", s, wantVersion)
	}

	for _, tc := range []struct {
		name string
		req  []byte
		code codes.Code
		msg  string
	}{
		// numpy's default float64: TF's classic refusal, before any v2 call.
		{"float64", tfclient.PredictRequest(tfclient.Spec("half_plus_two"), map[string]tfclient.TensorProto{"x": tfclient.Float64([]int64{2}, 1, 2)}),
			codes.InvalidArgument, "Expects arg[0] to be float but double is provided"},
		{"unknown model", tfclient.PredictRequest(tfclient.Spec("nope"), map[string]tfclient.TensorProto{"x": tfclient.Float32(nil, 1)}),
			codes.NotFound, "Servable not found for request: Latest(nope)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Predict(ctx, tc.req)
			if st := status.Convert(err); st.Code() != tc.code || st.Message() != tc.msg {
				t.Errorf("got %v %q, want %v %q", st.Code(), st.Message(), tc.code, tc.msg)
			}
		})
	}

	md, err := c.GetModelMetadata(ctx, tfclient.GetModelMetadataRequest(tfclient.Spec("half_plus_two"), "signature_def"))
	if err != nil {
		t.Fatal(err)
	}
	sd := md.SignatureDefs["serving_default"]
	if md.TypeURL != tfclient.SignatureDefMapURL || !reflect.DeepEqual(sd.Inputs["x"], tfclient.TensorInfo{Name: "x:0", DType: tfclient.DTFloat, Shape: []int64{-1}}) {
		t.Errorf("metadata %+v", md)
	}
	vs, err := c.GetModelStatus(ctx, tfclient.GetModelStatusRequest(tfclient.Spec("half_plus_two").WithVersion(1)))
	if err != nil || len(vs) != 1 || vs[0].Version != 1 || vs[0].State != 30 {
		t.Errorf("status %+v %v, want version 1 AVAILABLE", vs, err)
	}
	ev.wantNoViolations()
}
