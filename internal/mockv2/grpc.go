package mockv2

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tfsbridge/tfsbridge/internal/pbwire"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// GRPCService is the v2 gRPC service name.
const GRPCService = "inference.GRPCInferenceService"

// Message caps of the imitated servers' gRPC ports (docs/grpc.md §4.2): Triton takes
// INT32_MAX both ways, KServe's model server 8 MiB both ways, MLServer grpcio's default
// 4 MiB receive.
const (
	grpcMaxTriton   = math.MaxInt32
	grpcMaxKServe   = 8 << 20
	grpcMaxMLServer = 4 << 20
)

// rawCodec carries messages as the bytes they are: the mock reads and writes them with its
// own protowire code (grpcwire.go). Its empty name keeps content-type application/grpc.
type rawCodec struct{}

func (rawCodec) Name() string { return "" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.([]byte); ok {
		return b, nil
	}
	return nil, fmt.Errorf("mockv2: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("mockv2: cannot unmarshal into %T", v)
	}
	*p = append((*p)[:0], data...)
	return nil
}

// NewGRPCServer returns a grpc.Server serving inference.GRPCInferenceService (ServerLive,
// ServerReady, ServerMetadata, ModelReady, ModelMetadata, ModelInfer) with the same
// models and kind as the REST side, and the kind's message caps. opts come after the
// mock's own; the caller serves it on a listener and stops it.
func (s *Server) NewGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	limit := grpcMaxTriton
	switch s.kind {
	case kindKServe:
		limit = grpcMaxKServe
	case kindMLServer:
		limit = grpcMaxMLServer
	}
	send := limit
	if s.kind == kindMLServer {
		send = math.MaxInt32 // grpcio limits only what it receives by default
	}
	all := append([]grpc.ServerOption{
		grpc.ForceServerCodec(rawCodec{}),
		grpc.MaxRecvMsgSize(limit),
		grpc.MaxSendMsgSize(send),
	}, opts...)
	gs := grpc.NewServer(all...)
	gs.RegisterService(s.grpcServiceDesc(), s)
	return gs
}

// grpcServiceDesc describes the service by hand: no generated code.
func (s *Server) grpcServiceDesc() *grpc.ServiceDesc {
	methods := []struct {
		name string
		fn   func(ctx context.Context, msg []byte) ([]byte, error)
	}{
		{"ServerLive", func(context.Context, []byte) ([]byte, error) { return pbBool(nil, 1, true), nil }},
		{"ServerReady", func(context.Context, []byte) ([]byte, error) { return pbBool(nil, 1, true), nil }},
		{"ServerMetadata", s.grpcServerMetadata},
		{"ModelReady", s.grpcModelReady},
		{"ModelMetadata", s.grpcModelMetadata},
		{"ModelInfer", s.grpcModelInfer},
	}
	desc := &grpc.ServiceDesc{ServiceName: GRPCService, HandlerType: (*any)(nil), Metadata: "grpc_service.proto"}
	for _, m := range methods {
		fn, name := m.fn, m.name
		desc.Methods = append(desc.Methods, grpc.MethodDesc{
			MethodName: name,
			Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var in []byte
				if err := dec(&in); err != nil {
					return nil, err
				}
				out, err := fn(ctx, in)
				s.log.Debug("mockv2 grpc", "method", name, "code", status.Code(err).String())
				if err != nil {
					return nil, err
				}
				return out, nil
			},
		})
	}
	return desc
}

// malformed is what the servers' protobuf runtimes answer to bytes they cannot parse.
func malformed() error {
	return status.Error(codes.Internal, "grpc: error unmarshalling request: "+pbwire.ErrMalformed.Error())
}

func (s *Server) grpcServerMetadata(context.Context, []byte) ([]byte, error) {
	name, version, ext := "triton", tritonVersion, tritonExtensions
	switch s.kind {
	case kindKServe:
		name, version, ext = "kserve", kserveVersion, []string{"model_repository_extension"}
	case kindMLServer:
		name, version, ext = "mlserver", mlserverVersion, nil
	}
	b := pbString(nil, 1, name)
	b = pbString(b, 2, version)
	for _, e := range ext {
		b = pbBytes(b, 3, []byte(e))
	}
	return b, nil
}

// grpcLookup finds the model of a gRPC request the way each server's gRPC front end does
// (docs/grpc.md §4.2): Triton takes "" as the latest version and refuses a version that
// is not an integer; KServe ignores the version; MLServer passes "" on, hence its double
// space in "Model m with version  not found".
func (s *Server) grpcLookup(name, version string) (*model, error) {
	m := s.models[name]
	switch s.kind {
	case kindKServe:
		if m == nil {
			return nil, status.Error(codes.NotFound, "Model with name "+name+" does not exist.")
		}
	case kindMLServer:
		if m == nil || (version != "" && version != mlserverModelVersion) {
			return nil, status.Error(codes.NotFound, "Model "+name+" with version "+version+" not found")
		}
	default:
		if version != "" {
			v, err := strconv.ParseInt(version, 10, 64)
			if err != nil || v < 0 {
				return nil, status.Error(codes.InvalidArgument, "failed to get model version from specified version string '"+
					version+"' (details: stol), version should be an integral value > 0")
			}
			if m != nil && v != 1 {
				return nil, status.Errorf(codes.NotFound, "Request for unknown model: '%s' version %d is not found", name, v)
			}
		}
		if m == nil {
			return nil, status.Error(codes.NotFound, "Request for unknown model: '"+name+"' is not found")
		}
	}
	return m, nil
}

func (s *Server) grpcModelReady(_ context.Context, msg []byte) ([]byte, error) {
	name, version, err := decodeModelRequest(msg)
	if err != nil {
		return nil, malformed()
	}
	if _, err := s.grpcLookup(name, version); err != nil {
		if s.kind == kindMLServer {
			// MLServer's ModelReady has no error handler: grpcio answers UNKNOWN.
			return nil, status.Error(codes.Unknown, "Unexpected <class 'mlserver.errors.ModelNotFound'>: "+status.Convert(err).Message())
		}
		return nil, err
	}
	return pbBool(nil, 1, true), nil
}

func (s *Server) grpcModelMetadata(_ context.Context, msg []byte) ([]byte, error) {
	name, version, err := decodeModelRequest(msg)
	if err != nil {
		return nil, malformed()
	}
	m, err := s.grpcLookup(name, version)
	if err != nil {
		return nil, err
	}
	in, out := s.metaTensors(m, m.inputs), s.metaTensors(m, m.outputs)
	if m.opaque {
		in, out = nil, nil
	}
	switch s.kind {
	case kindKServe:
		return appendModelMetadata(m.name, nil, "", in, out), nil
	case kindMLServer:
		return appendModelMetadata(m.name, []string{mlserverModelVersion}, "", in, out), nil
	}
	return appendModelMetadata(m.name, []string{tritonModelVersion}, m.platform, in, out), nil
}

// grpcModelInfer is ModelInfer: inputs from raw_input_contents or typed contents per the
// kind's rules, the REST side's model checks and models, and the answer raw
// (raw_output_contents, Triton's habit and the Python servers' when the request was raw)
// or typed (contents).
func (s *Server) grpcModelInfer(ctx context.Context, msg []byte) ([]byte, error) {
	req, err := decodeInferRequest(msg)
	if err != nil {
		return nil, malformed()
	}
	m, err := s.grpcLookup(req.modelName, req.modelVersion)
	if err != nil {
		return nil, err
	}
	in, err := s.grpcInputs(m, req)
	if err != nil {
		return nil, err
	}
	ordered, herr := checkPyInputs(m, in)
	if herr == nil {
		herr = checkSizes(m, ordered)
	}
	if herr != nil {
		return nil, status.Error(codes.InvalidArgument, herrMessage(herr))
	}
	var sel []int
	for _, name := range req.outputs {
		i, _ := m.output(name)
		if i < 0 {
			return nil, status.Error(codes.InvalidArgument, "unexpected inference output '"+name+"' for model '"+m.name+"'")
		}
		sel = append(sel, i)
	}
	out, herr, ok := s.run(ctx, m, ordered)
	if !ok {
		return nil, status.Error(codes.Canceled, "context canceled")
	}
	if herr != nil {
		return nil, status.Error(codes.InvalidArgument, herrMessage(herr))
	}
	if sel != nil {
		picked := make([]tensor.Tensor, len(sel))
		for i, j := range sel {
			picked[i] = out[j]
		}
		out = picked
	}
	if m.garbage {
		// Test hook: a 200 whose message is not valid protobuf (a length running
		// past the end).
		return []byte{0x0a, 0xff, 0x01}, nil
	}
	raw := len(req.raw) > 0
	version := tritonModelVersion
	switch s.kind {
	case kindKServe:
		version = ""
		for _, t := range out {
			raw = raw || t.DataType == tensor.FP16
		}
	case kindMLServer:
		version = mlserverModelVersion
	default:
		raw = true
	}
	return appendInferResponse(m.name, version, req.id, out, raw), nil
}

// grpcInputs builds the model inputs of req with the kind's raw/typed rules.
func (s *Server) grpcInputs(m *model, req *grpcInferRequest) ([]tensor.Tensor, error) {
	bad := func(msg string) error { return status.Error(codes.InvalidArgument, msg) }
	if len(req.raw) > 0 {
		switch s.kind {
		case kindKServe:
			if len(req.raw) != len(req.inputs) {
				return nil, bad("the number of inputs and raw_input_contents must match: got " + strconv.Itoa(len(req.inputs)) +
					" inputs and " + strconv.Itoa(len(req.raw)) + " raw_input_contents")
			}
		case kindTriton:
			for _, in := range req.inputs {
				if in.contents.set {
					return nil, bad("contents field must not be specified when using raw_input_contents for '" + in.name + "' for model '" + m.name + "'")
				}
			}
		}
	}
	out := make([]tensor.Tensor, 0, len(req.inputs))
	next := 0 // the next raw entry (MLServer fills inputs without data in order)
	for _, in := range req.inputs {
		dt, ok := tensor.ParseV2(in.datatype)
		if !ok {
			return nil, bad("invalid datatype for input '" + in.name + "': " + strconv.Quote(in.datatype))
		}
		t := tensor.Tensor{Name: in.name, DataType: dt, Shape: in.shape}
		var data []byte
		switch {
		case len(req.raw) > 0 && !(s.kind == kindMLServer && in.contents.set):
			if next >= len(req.raw) {
				return nil, bad("unable to find data for input tensor '" + in.name + "' for model '" + m.name + "' in request.")
			}
			data = req.raw[next]
			next++
		default:
			data = s.typedBytes(dt, &in.contents)
		}
		if dt == tensor.Bytes {
			cnt, ok := elementCount(in.shape)
			if !ok {
				cnt = math.MaxInt64
			}
			strs, msg := splitStrings(data, cnt, "inference input '"+in.name+"' for model '"+m.name+"'")
			if msg != "" {
				return nil, bad(msg)
			}
			t.Strings = strs
		} else {
			t.Data = data
		}
		out = append(out, t)
	}
	return out, nil
}

// typedBytes turns typed contents into the binary form (BYTES: length-prefixed). Narrow
// integer types take the low bytes of int_contents/uint_contents, as Triton does; typed
// FP16 comes from bytes_contents on MLServer and is read as empty elsewhere (KServe).
func (s *Server) typedBytes(dt tensor.DataType, c *grpcContents) []byte {
	w := dt.Size()
	switch dt {
	case tensor.Bool:
		return leBytes(len(c.bools), 1, func(i int) uint64 { return uint64(b2i(c.bools[i])) })
	case tensor.Int8, tensor.Int16, tensor.Int32:
		return leBytes(len(c.ints), w, func(i int) uint64 { return uint64(c.ints[i]) })
	case tensor.Uint8, tensor.Uint16, tensor.Uint32:
		return leBytes(len(c.uints), w, func(i int) uint64 { return uint64(c.uints[i]) })
	case tensor.Int64:
		return leBytes(len(c.int64s), 8, func(i int) uint64 { return uint64(c.int64s[i]) })
	case tensor.Uint64:
		return leBytes(len(c.uint64s), 8, func(i int) uint64 { return c.uint64s[i] })
	case tensor.FP32:
		return leBytes(len(c.fp32s), 4, func(i int) uint64 { return uint64(math.Float32bits(c.fp32s[i])) })
	case tensor.FP64:
		return leBytes(len(c.fp64s), 8, func(i int) uint64 { return math.Float64bits(c.fp64s[i]) })
	case tensor.Bytes:
		return serializeStrings(nil, c.bytes)
	case tensor.FP16:
		if s.kind == kindMLServer {
			var b []byte
			for _, e := range c.bytes {
				b = append(b, e...)
			}
			return b
		}
	}
	return nil
}

// checkSizes is the byte-size check the REST paths make while decoding: fixed-size data
// must hold exactly the shape's elements.
func checkSizes(m *model, in []tensor.Tensor) *httpError {
	for _, t := range in {
		if t.DataType == tensor.Bytes {
			continue
		}
		cnt, ok := elementCount(t.Shape)
		want := int64(math.MaxInt64)
		if ok && cnt <= math.MaxInt64/int64(t.DataType.Size()) {
			want = cnt * int64(t.DataType.Size())
		}
		if int64(len(t.Data)) != want {
			return errorJSON(400, "input byte size mismatch for input '"+t.Name+"' for model '"+m.name+"'. Expected "+
				strconv.FormatInt(want, 10)+", got "+strconv.Itoa(len(t.Data)))
		}
	}
	return nil
}

// herrMessage is the message of an {"error": msg} answer.
func herrMessage(e *httpError) string {
	b := e.body
	const pre = `{"error":`
	if strings.HasPrefix(string(b), pre) {
		if msg, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(string(b), pre), "}")); err == nil {
			return msg
		}
	}
	return string(b)
}

// appendInferResponse writes a ModelInferResponse: model_name=1, model_version=2, id=3,
// outputs=5 {name, datatype, shape[, contents=5]}, raw_output_contents=6 (one per output).
func appendInferResponse(name, version, id string, out []tensor.Tensor, raw bool) []byte {
	b := pbString(nil, 1, name)
	b = pbString(b, 2, version)
	b = pbString(b, 3, id)
	for i := range out {
		t := &out[i]
		o := appendTensorMeta(nil, t.Name, t.DataType.String(), t.Shape)
		if !raw {
			o = pbBytes(o, 5, typedContents(t))
		}
		b = pbBytes(b, 5, o)
	}
	if raw {
		for i := range out {
			b = pbBytes(b, 6, binaryBytes(&out[i]))
		}
	}
	return b
}

// typedContents writes a tensor's InferTensorContents: INT8/16 sign-extended and
// UINT8/16 zero-extended into the 32-bit lists, FP16 element by element in
// bytes_contents (MLServer's habit).
func typedContents(t *tensor.Tensor) []byte {
	d, w := t.Data, t.DataType.Size()
	n := 0
	if w > 0 {
		n = len(d) / w
	}
	at := func(i int) uint64 {
		switch w {
		case 1:
			return uint64(d[i])
		case 2:
			return uint64(binary.LittleEndian.Uint16(d[2*i:]))
		case 4:
			return uint64(binary.LittleEndian.Uint32(d[4*i:]))
		}
		return binary.LittleEndian.Uint64(d[8*i:])
	}
	var b []byte
	switch t.DataType {
	case tensor.Bool:
		b = pbPackedVarints(b, 1, n, at)
	case tensor.Int8:
		b = pbPackedVarints(b, 2, n, func(i int) uint64 { return uint64(int64(int8(d[i]))) })
	case tensor.Int16:
		b = pbPackedVarints(b, 2, n, func(i int) uint64 { return uint64(int64(int16(at(i)))) })
	case tensor.Int32:
		b = pbPackedVarints(b, 2, n, func(i int) uint64 { return uint64(int64(int32(at(i)))) })
	case tensor.Int64:
		b = pbPackedVarints(b, 3, n, at)
	case tensor.Uint8, tensor.Uint16, tensor.Uint32:
		b = pbPackedVarints(b, 4, n, at)
	case tensor.Uint64:
		b = pbPackedVarints(b, 5, n, at)
	case tensor.FP32:
		if n > 0 {
			b = pbBytes(b, 6, d)
		}
	case tensor.FP64:
		if n > 0 {
			b = pbBytes(b, 7, d)
		}
	case tensor.FP16, tensor.BF16:
		for i := 0; i < n; i++ {
			b = pbBytes(b, 8, d[2*i:2*i+2])
		}
	case tensor.Bytes:
		for _, s := range t.Strings {
			b = pbBytes(b, 8, s)
		}
	}
	return b
}
