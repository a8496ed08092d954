package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
	"github.com/tfsbridge/tfsbridge/test/envoysim"
	"github.com/tfsbridge/tfsbridge/test/internal/tfclient"
)

// tfGRPC is a TF Serving gRPC stand-in: any method, the message taken as
// raw bytes and recorded, answered with fixed bytes, header and trailer
// metadata — or, for GetModelMetadata, with an error status — so a test
// can tell TF Serving's answer from tfsbridge's translation and see that
// both directions went through unchanged.
type tfGRPC struct {
	addr string
	mu   sync.Mutex
	got  []tfGRPCCall
	// in: whether the last message received came compressed.
	in inPayloads
}

// inPayloads is a stats.Handler that records whether the last message
// received came compressed (gRPC metadata never shows grpc-encoding).
type inPayloads struct{ compressed atomic.Bool }

func (p *inPayloads) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (p *inPayloads) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (p *inPayloads) HandleConn(context.Context, stats.ConnStats) {}
func (p *inPayloads) HandleRPC(_ context.Context, s stats.RPCStats) {
	if in, ok := s.(*stats.InPayload); ok {
		// Uncompressed, the wire length is the message's.
		p.compressed.Store(in.CompressedLength != in.Length)
	}
}

// tfGRPCCall is one call the stand-in received.
type tfGRPCCall struct {
	method string
	msg    []byte
	md     metadata.MD
}

// The stand-in's answers: a message no translation would write (a
// PredictResponse with model_spec name "from-tf-serving") and its
// metadata; GetModelMetadata fails with tfGRPCError.
var (
	tfGRPCAnswer = tfclient.Spec("from-tf-serving").Marshal()
	tfGRPCError  = status.New(codes.FailedPrecondition, "TF Serving's own error: ünïcode % kept")
)

// grpcRawCodec frames messages as the bytes they are.
type grpcRawCodec struct{}

func (grpcRawCodec) Name() string { return "proto" }

func (grpcRawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }

func (grpcRawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}

// startTFGRPC starts the stand-in; it stops with the test.
func startTFGRPC(t *testing.T) *tfGRPC {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tf := &tfGRPC{addr: lis.Addr().String()}
	srv := grpc.NewServer(grpc.ForceServerCodec(grpcRawCodec{}), grpc.StatsHandler(&tf.in), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		var msg []byte
		if err := stream.RecvMsg(&msg); err != nil {
			return err
		}
		md, _ := metadata.FromIncomingContext(stream.Context())
		tf.mu.Lock()
		tf.got = append(tf.got, tfGRPCCall{method: method, msg: msg, md: md})
		tf.mu.Unlock()
		if strings.HasSuffix(method, "/GetModelMetadata") {
			return tfGRPCError.Err()
		}
		if err := stream.SetHeader(metadata.Pairs("x-tf-header", "h")); err != nil {
			return err
		}
		answer := tfGRPCAnswer
		if err := stream.SendMsg(&answer); err != nil {
			return err
		}
		stream.SetTrailer(metadata.Pairs("x-tf-trailer", "t"))
		return nil
	}))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return tf
}

// calls returns how many calls the stand-in received and the last one.
func (tf *tfGRPC) calls() (int, tfGRPCCall) {
	tf.mu.Lock()
	defer tf.mu.Unlock()
	if len(tf.got) == 0 {
		return 0, tfGRPCCall{}
	}
	return len(tf.got), tf.got[len(tf.got)-1]
}

// grpcSplitMap shares half_plus_two 50/50 between TF Serving's gRPC port
// (the stand-in) and the default v2 server, sticky on x-user-id; simple
// lives on a TF Serving server without a grpc address.
const grpcSplitMap = `
servers:
  tfs: {url: "http://127.0.0.1:1", kind: tfserving, grpc: "{{tfgrpc}}"}
  old: {url: "http://127.0.0.1:1", kind: tfserving}
models:
  half_plus_two:
    split: {tfs: 50, default: 50}
    split_key: x-user-id
  simple:
    server: old
`

// TestGRPCSplit: a TF gRPC client's calls follow the model map's split
// through every transport: sticky per x-user-id, the TF Serving share
// reaching TF Serving's gRPC port with the client's exact message and
// path and coming back with TF Serving's exact answer (message, metadata,
// error status), the v2 share translated.
func TestGRPCSplit(t *testing.T) {
	tf := startTFGRPC(t)
	doc := strings.ReplaceAll(grpcSplitMap, "{{tfgrpc}}", tf.addr)
	st := newGRPCStackWith(t, triton, grpcStackOptions{ModelMap: doc,
		Routes: []envoysim.HeaderRoute{{Header: "x-tfsbridge-server", Value: "tfs", Upstream: "http://" + tf.addr}}})
	m, err := modelmap.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	split := m.Model("half_plus_two").Split
	req := tfclient.PredictRequest(tfclient.Spec("half_plus_two"), map[string]tfclient.TensorProto{"x": tfclient.Float32([]int64{3}, 1, 2, 5)})
	count := func(server string) float64 {
		return st.bridge.Metrics.Value("tfsbridge_split_requests_total", "model", "half_plus_two", "server", server)
	}
	for _, via := range grpcTransports {
		t.Run(via, func(t *testing.T) {
			c := st.clients[via]
			ctx := callContext(t)
			t.Run("sticky per key, the TF Serving share unchanged", func(t *testing.T) {
				tfs0, def0 := count("tfs"), count("default")
				var toTFS, toV2 int
				for i := range 24 {
					key := fmt.Sprintf("user-%d", i)
					want := split.Pick(key)
					for range 3 {
						n0, _ := tf.calls()
						kctx := metadata.AppendToOutgoingContext(ctx, "x-user-id", key)
						var hdr, trl metadata.MD
						var out []byte
						err := c.Conn().Invoke(kctx, tfclient.MethodPredict, req, &out, grpc.Header(&hdr), grpc.Trailer(&trl))
						if err != nil {
							t.Fatalf("%s: %v", key, err)
						}
						n1, last := tf.calls()
						got := "default"
						if n1 > n0 {
							got = "tfs"
						}
						if got != want {
							t.Fatalf("%s went to %s, want %s (sticky on x-user-id)", key, got, want)
						}
						if got == "default" {
							p, err := tfclient.DecodePredictResponse(out)
							if err != nil || p.ModelSpec.Name != "half_plus_two" || len(p.Outputs["y"].FloatVal) != 3 {
								t.Fatalf("%s: v2 share's answer %+v %v", key, p, err)
							}
							toV2++
							continue
						}
						toTFS++
						if tf.in.compressed.Load() {
							t.Fatalf("%s: an uncompressed message seen compressed (the compression check below would prove nothing)", key)
						}
						if last.method != tfclient.MethodPredict || !bytes.Equal(last.msg, req) || strings.Join(last.md.Get("x-user-id"), ",") != key {
							t.Fatalf("%s: TF Serving got %s % x (x-user-id %q), want the client's %s % x", key, last.method, last.msg, last.md.Get("x-user-id"), tfclient.MethodPredict, req)
						}
						if !bytes.Equal(out, tfGRPCAnswer) || strings.Join(hdr.Get("x-tf-header"), ",") != "h" || strings.Join(trl.Get("x-tf-trailer"), ",") != "t" {
							t.Fatalf("%s: answer % x header %v trailer %v, want TF Serving's own", key, out, hdr, trl)
						}
					}
				}
				if toTFS == 0 || toV2 == 0 {
					t.Fatalf("24 keys all went one way (tfs %d, v2 %d)", toTFS, toV2)
				}
				if got := count("tfs") - tfs0; got != float64(toTFS) {
					t.Errorf("split_requests_total{tfs} grew by %v, TF Serving got %d", got, toTFS)
				}
				if got := count("default") - def0; got != float64(toV2) {
					t.Errorf("split_requests_total{default} grew by %v, the v2 share got %d", got, toV2)
				}
			})
			t.Run("compressed both ways, unchanged", func(t *testing.T) {
				// The stand-in answers with the request's compressor, as
				// grpc-go does: the gzip message goes back to the client as
				// TF Serving wrote it (tfsbridge would inflate a v2 one).
				key := keyTo(t, split, "tfs")
				var client inPayloads
				cc, err := tfclient.Dial(c.Conn().Target(), grpc.WithStatsHandler(&client))
				if err != nil {
					t.Fatal(err)
				}
				defer cc.Close()
				var out []byte
				err = cc.Conn().Invoke(metadata.AppendToOutgoingContext(ctx, "x-user-id", key), tfclient.MethodPredict, req, &out, grpc.UseCompressor(gzip.Name))
				if err != nil || !bytes.Equal(out, tfGRPCAnswer) {
					t.Fatalf("got % x %v, want TF Serving's answer", out, err)
				}
				if _, last := tf.calls(); !bytes.Equal(last.msg, req) || !tf.in.compressed.Load() {
					t.Errorf("TF Serving got % x compressed %v, want the client's gzip message", last.msg, tf.in.compressed.Load())
				}
				if !client.compressed.Load() {
					t.Error("the answer came uncompressed, want TF Serving's gzip message")
				}
			})
			t.Run("TF Serving's error status unchanged", func(t *testing.T) {
				key := keyTo(t, split, "tfs")
				mreq := tfclient.GetModelMetadataRequest(tfclient.Spec("half_plus_two"), "signature_def")
				_, err := c.Call(metadata.AppendToOutgoingContext(ctx, "x-user-id", key), tfclient.MethodGetModelMetadata, mreq)
				if st, _ := status.FromError(err); st.Code() != tfGRPCError.Code() || st.Message() != tfGRPCError.Message() {
					t.Errorf("got %v %q, want TF Serving's %v %q", st.Code(), st.Message(), tfGRPCError.Code(), tfGRPCError.Message())
				}
				if _, last := tf.calls(); !bytes.Equal(last.msg, mreq) {
					t.Errorf("TF Serving got % x, want % x", last.msg, mreq)
				}
			})
			t.Run("a TF Serving server without a grpc address", func(t *testing.T) {
				_, err := c.Call(ctx, tfclient.MethodPredict, tfclient.PredictRequest(tfclient.Spec("simple"),
					map[string]tfclient.TensorProto{"x": tfclient.Float32([]int64{1}, 1)}))
				want := `The model map's server "old" is a TF Serving server without a grpc address (TF Serving's gRPC port, 8500): tfsbridge cannot pass gRPC calls to it`
				if st, _ := status.FromError(err); st.Code() != codes.Unavailable || st.Message() != want {
					t.Errorf("got %v %q, want UNAVAILABLE %q", st.Code(), st.Message(), want)
				}
			})
		})
	}
}

// keyTo returns a split key that split sends to server.
func keyTo(t *testing.T, split *modelmap.Split, server string) string {
	t.Helper()
	for i := range 1000 {
		if k := fmt.Sprintf("key-%d", i); split.Pick(k) == server {
			return k
		}
	}
	t.Fatalf("no key of 1000 reaches %s", server)
	return ""
}
