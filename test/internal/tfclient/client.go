package tfclient

import (
	"context"
	"fmt"
	"math"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// rawCodec hands messages over as the bytes they are: requests are built and answers
// decoded by this package, so the gRPC runtime only frames them. Its name is empty: grpc-go
// makes the content-type "application/grpc+<name>" from a forced codec's name, and an
// empty one gives plain application/grpc, what grpcio (Python) and generated stubs send.
type rawCodec struct{}

func (rawCodec) Name() string { return "" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case []byte:
		return m, nil
	case *[]byte:
		return *m, nil
	}
	return nil, fmt.Errorf("tfclient: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("tfclient: cannot unmarshal into %T", v)
	}
	*p = append((*p)[:0], data...)
	return nil
}

// Client calls TF Serving's gRPC services over one HTTP/2 (h2c) connection.
type Client struct {
	conn *grpc.ClientConn
}

// Dial connects (lazily) to addr ("host:port", plaintext HTTP/2) with TF Serving's message
// limits (INT32_MAX both ways); opts are added after the defaults.
func Dial(addr string, opts ...grpc.DialOption) (*Client, error) {
	all := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}),
			grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)),
	}, opts...)
	conn, err := grpc.NewClient(addr, all...)
	if err != nil {
		return nil, fmt.Errorf("tfclient: %w", err)
	}
	return &Client{conn: conn}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Conn is the underlying connection (for calls of other services on the same port).
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Reply is a raw answer: the response message and the metadata that came with it.
type Reply struct {
	Message          []byte
	Header, Trailers metadata.MD
}

// Call invokes method with the serialized request req. The error is the call's gRPC
// status (status.FromError reads it); the reply's metadata is filled either way.
func (c *Client) Call(ctx context.Context, method string, req []byte, opts ...grpc.CallOption) (*Reply, error) {
	r := &Reply{}
	var out []byte
	opts = append(opts, grpc.Header(&r.Header), grpc.Trailer(&r.Trailers))
	err := c.conn.Invoke(ctx, method, req, &out, opts...)
	r.Message = out
	return r, err
}

// Predict calls PredictionService/Predict.
func (c *Client) Predict(ctx context.Context, req []byte, opts ...grpc.CallOption) (*PredictResponse, error) {
	r, err := c.Call(ctx, MethodPredict, req, opts...)
	if err != nil {
		return nil, err
	}
	return DecodePredictResponse(r.Message)
}

// Classify calls PredictionService/Classify.
func (c *Client) Classify(ctx context.Context, req []byte, opts ...grpc.CallOption) (*ClassificationResponse, error) {
	r, err := c.Call(ctx, MethodClassify, req, opts...)
	if err != nil {
		return nil, err
	}
	return DecodeClassificationResponse(r.Message)
}

// Regress calls PredictionService/Regress.
func (c *Client) Regress(ctx context.Context, req []byte, opts ...grpc.CallOption) (*RegressionResponse, error) {
	r, err := c.Call(ctx, MethodRegress, req, opts...)
	if err != nil {
		return nil, err
	}
	return DecodeRegressionResponse(r.Message)
}

// GetModelMetadata calls PredictionService/GetModelMetadata.
func (c *Client) GetModelMetadata(ctx context.Context, req []byte, opts ...grpc.CallOption) (*MetadataResponse, error) {
	r, err := c.Call(ctx, MethodGetModelMetadata, req, opts...)
	if err != nil {
		return nil, err
	}
	return DecodeMetadataResponse(r.Message)
}

// GetModelStatus calls ModelService/GetModelStatus.
func (c *Client) GetModelStatus(ctx context.Context, req []byte, opts ...grpc.CallOption) ([]ModelVersionStatus, error) {
	r, err := c.Call(ctx, MethodGetModelStatus, req, opts...)
	if err != nil {
		return nil, err
	}
	return DecodeStatusResponse(r.Message)
}
