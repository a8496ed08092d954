package extproc

import (
	"context"
	"net"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The BUFFERED image exchange's two large messages (BenchmarkPath's
// image row): the TF JSON request and the v2 body sent back.
const (
	imageRequestBytes = 1_760_000
	imageV2Bytes      = 602_112
)

// bodyAnswerer answers every request body as the BUFFERED loop does,
// without translating: received in its frames (recvFramed), answered
// with a body mutation of reply in parts (partsResponse).
type bodyAnswerer struct {
	extprocv3.UnimplementedExternalProcessorServer
	reply [][]byte
}

func (a bodyAnswerer) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	f := &framedRequest{}
	defer f.free()
	for {
		if err := recvFramed(stream, f); err != nil {
			return nil
		}
		f.free()
		resp := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
			Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{}}}}}}
		if err := stream.SendMsg(&partsResponse{msg: resp, parts: a.reply}); err != nil {
			return err
		}
	}
}

// BenchmarkBufferedImageTransport is the gRPC side of a BUFFERED image
// exchange alone: a client with Envoy's windows (as test/envoysim's)
// sends the 1.76 MB request body, the server (NewServer's codec and
// TransportOptions) receives it in its frames and answers 602 KB in three
// parts, as a translated v2 body leaves. It is where transport settings
// (buffer sizes, windows) are tried: `-cpuprofile` and focus on
// handleRawConn (the server's reads) and NewServerTransport (its writes).
func BenchmarkBufferedImageTransport(b *testing.B) {
	v2 := make([]byte, imageV2Bytes)
	third := imageV2Bytes / 3
	opts := append([]grpc.ServerOption{grpc.ForceServerCodecV2(newBodyCodec())}, TransportOptions()...)
	gs := grpc.NewServer(opts...)
	extprocv3.RegisterExternalProcessorServer(gs, bodyAnswerer{reply: [][]byte{v2[:third], v2[third : 2*third], v2[2*third:]}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(16<<20), grpc.WithInitialConnWindowSize(24<<20),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	s, err := extprocv3.NewExternalProcessorClient(conn).Process(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	req := requestBody(make([]byte, imageRequestBytes), true)
	b.SetBytes(imageRequestBytes + imageV2Bytes)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Send(req); err != nil {
			b.Fatal(err)
		}
		r, err := s.Recv()
		if err != nil {
			b.Fatal(err)
		}
		if n := len(r.GetRequestBody().GetResponse().GetBodyMutation().GetBody()); n != imageV2Bytes {
			b.Fatalf("answer of %d bytes, want %d", n, imageV2Bytes)
		}
	}
}
