package mockv2

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// This file imitates Triton's HTTP frontend (src/http_server.cc: HandleInfer,
// GetInferenceHeaderLength, ParseJsonTritonIO, ReadDataFromJson,
// FinalizeResponse) and the checks of its core (InferenceRequest::Normalize
// and the input byte-size validation), with their texts and status codes:
// TritonJson errors are INTERNAL (500), argument errors 400.

const tritonIHCL = "Inference-Header-Content-Length"

// TritonJson's type-mismatch texts.
const (
	errNonString = "attempt to access JSON non-string as string"
	errNonBool   = "attempt to access JSON non-boolean as boolean"
	errNonInt    = "attempt to access JSON non-signed-integer as signed-integer"
	errNonUint   = "attempt to access JSON non-unsigned-integer as unsigned-integer"
	errNonNumber = "attempt to access JSON non-number as double"
	errNonArray  = "attempt to access JSON non-array as array"
	errNonObject = "attempt to get members for non-object"
)

func errMissing(name string) string {
	return "attempt to access non-existing object member '" + name + "'"
}

// tritonInput is one input as the frontend hands it to the core: name,
// datatype, shape and the tensor bytes (binary as sent, JSON serialized).
type tritonInput struct {
	inputDesc
	raw []byte
}

type tritonOutput struct {
	name   string
	binary bool
}

type tritonRequest struct {
	id        string
	binaryAll bool
	inputs    []tritonInput
	// names holds the input and output names seen, to refuse duplicates
	// without a quadratic scan.
	inputNames, outputNames map[string]bool
	// outputs lists the requested outputs; empty means all, answered in
	// binary when binaryAll.
	outputs []tritonOutput
}

func (q *tritonRequest) logPrefix() string {
	id := q.id
	if id == "" {
		id = "<id_unknown>"
	}
	return "[request id: " + id + "] "
}

func (s *Server) tritonInfer(r *http.Request, m *model) (*reply, *httpError) {
	body, herr := s.readBody(r)
	if herr != nil {
		return nil, herr
	}
	hl, herr := tritonHeaderLength(r.Header, len(body))
	if herr != nil {
		return nil, herr
	}
	var req *tritonRequest
	if hl == 0 {
		// Inference-Header-Content-Length 0 (or an empty body without it):
		// the whole body is the one input, and every output is binary.
		req = &tritonRequest{binaryAll: true, inputs: []tritonInput{{raw: body}}}
		if herr = rawInput(m, req); herr != nil {
			return nil, herr
		}
	} else if req, herr = s.parseTritonRequest(m, body[:hl], body[hl:]); herr != nil {
		return nil, herr
	}
	in, herr := tritonCore(m, req)
	if herr != nil {
		return nil, herr
	}
	out, herr, ok := s.execute(r, m, in)
	if herr != nil || !ok {
		return nil, herr
	}
	return tritonResponse(r, m, req, out)
}

// tritonHeaderLength resolves the JSON length as GetInferenceHeaderLength
// does: the whole body without the header, else std::stoi of its value.
func tritonHeaderLength(h http.Header, contentLength int) (int, *httpError) {
	vals := h.Values(tritonIHCL)
	if len(vals) == 0 {
		return contentLength, nil
	}
	v := vals[0]
	n, valid, inRange := parseStoi(v)
	switch {
	case !valid:
		return 0, errorJSON(http.StatusBadRequest, "Unable to parse Inference-Header-Content-Length, got: "+v)
	case !inRange:
		return 0, errorJSON(http.StatusBadRequest,
			"Unable to parse Inference-Header-Content-Length, value is out of range [ -2147483648, 2147483647 ], got: "+v)
	case n < 0 || n > int64(contentLength):
		return 0, errorJSON(http.StatusBadRequest, "inference header size should be in range (0, "+
			strconv.Itoa(contentLength)+"), got: "+v)
	}
	return int(n), nil
}

// parseStoi is std::stoi: leading white space, an optional sign, at least
// one digit, and anything after the digits ignored.
func parseStoi(v string) (n int64, valid, inRange bool) {
	i := 0
	for i < len(v) && strings.IndexByte(" \t\n\v\f\r", v[i]) >= 0 {
		i++
	}
	neg := false
	if i < len(v) && (v[i] == '+' || v[i] == '-') {
		neg = v[i] == '-'
		i++
	}
	start := i
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		if n < 1<<40 { // beyond int32 either way; stop growing
			n = n*10 + int64(v[i]-'0')
		}
		i++
	}
	if i == start {
		return 0, false, false
	}
	if neg {
		n = -n
	}
	return n, true, n >= math.MinInt32 && n <= math.MaxInt32
}

// walkError stops a leaf walk with a complete answer.
type walkError struct{ e *httpError }

func (w walkError) Error() string { return w.e.Error() }

var errTooDeep = errors.New("too deep")

// walkLeaves visits the non-array values inside the array v in document
// order, the order in which ReadDataFromJsonHelper recurses; an array
// nested deeper than maxDepth (v itself is depth 1) stops the walk with
// errTooDeep when it is reached, as Triton's limit does. It is one linear
// pass: a recursive walk would re-skip every subtree once per level.
func walkLeaves(v jval, maxDepth int, visit func(jval) error) error {
	depth := 0
	for i := 0; i < len(v); {
		switch v[i] {
		case '[':
			if depth++; depth > maxDepth {
				return errTooDeep
			}
			i++
		case ']':
			depth--
			i++
		case ',', ' ', '\t', '\n', '\r':
			i++
		default:
			end := skipValue(v, i)
			if err := visit(v[i:end]); err != nil {
				return err
			}
			i = end
		}
	}
	return nil
}

func (s *Server) parseTritonRequest(m *model, header, bin []byte) (*tritonRequest, *httpError) {
	internal := func(msg string) *httpError { return errorJSON(http.StatusInternalServerError, msg) }
	bad := func(msg string) *httpError { return errorJSON(http.StatusBadRequest, msg) }
	doc, serr := scanDocument(header, dialectRapid)
	if serr != nil {
		return nil, internal("failed to parse the request JSON buffer: " + serr.rapidMessage() + " at " + strconv.Itoa(serr.Off))
	}
	req := &tritonRequest{inputNames: map[string]bool{}, outputNames: map[string]bool{}}
	if id, ok := doc.get("id", false); ok {
		if id.kind() != jString {
			return nil, internal("Unable to parse 'id': " + errNonString)
		}
		req.id = string(id.decodeString())
	}
	if herr := parseTritonParams(doc, req); herr != nil {
		return nil, herr
	}
	inputs, ok := doc.get("inputs", false)
	switch {
	case !ok:
		return nil, internal("Unable to parse 'inputs': " + errMissing("inputs"))
	case inputs.kind() != jArray:
		return nil, internal("Unable to parse 'inputs': " + errNonArray)
	}
	off := 0
	var herr *httpError
	inputs.elems(func(_ int, e jval) bool {
		var in tritonInput
		in, off, herr = s.parseTritonInput(m, req, e, bin, off)
		req.inputs = append(req.inputs, in)
		return herr == nil
	})
	if herr != nil {
		return nil, herr
	}
	if off != len(bin) {
		return nil, bad("unexpected additional input data for model '" + m.name + "'")
	}
	if outs, ok := doc.get("outputs", false); ok {
		if outs.kind() != jArray {
			return nil, internal("Unable to parse 'outputs': " + errNonArray)
		}
		outs.elems(func(_ int, e jval) bool {
			herr = parseTritonOutput(req, e)
			return herr == nil
		})
		if herr != nil {
			return nil, herr
		}
	}
	return req, nil
}

// parseTritonParams reads the request "parameters" as ParseJsonTritonParams.
func parseTritonParams(doc jval, req *tritonRequest) *httpError {
	params, ok := doc.get("parameters", false)
	if !ok {
		return nil
	}
	if params.kind() != jObject {
		return errorJSON(http.StatusInternalServerError, "failed to get request params.: "+errNonObject)
	}
	var herr *httpError
	seen := map[string]bool{}
	params.members(func(k, v jval) bool {
		key := string(k.decodeString())
		if seen[key] {
			return true // rapidjson reads the first of duplicate keys, already checked
		}
		seen[key] = true
		fail := func(what string) {
			herr = errorJSON(http.StatusInternalServerError, "Unable to parse '"+key+"': "+what)
		}
		switch {
		case key == "sequence_id":
			if !v.number().isUint64 && v.kind() != jString {
				fail(errNonString)
			}
		case key == "sequence_start" || key == "sequence_end":
			if v.kind() != jBool {
				fail(errNonBool)
			}
		case key == "priority" || key == "timeout":
			if v.kind() != jNumber || !v.number().isUint64 {
				fail(errNonUint)
			}
		case key == "binary_data_output":
			if v.kind() != jBool {
				fail(errNonBool)
			} else {
				req.binaryAll = v.isTrue()
			}
		case strings.HasPrefix(key, "triton_"):
			herr = errorJSON(http.StatusBadRequest,
				"parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.")
		case key == "headers":
		default:
			if k := v.kind(); k != jString && k != jNumber && k != jBool {
				herr = errorJSON(http.StatusBadRequest,
					"parameter '"+key+"' has invalid type. It should be either 'int', 'bool', or 'string'.")
			}
		}
		return herr == nil
	})
	return herr
}

// memberString is MemberAsString with ParseJsonTritonIO's wrapping text.
func memberString(obj jval, key string) (string, *httpError) {
	v, ok := obj.get(key, false)
	switch {
	case !ok:
		return "", errorJSON(http.StatusInternalServerError, "Unable to parse '"+key+"': "+errMissing(key))
	case v.kind() != jString:
		return "", errorJSON(http.StatusInternalServerError, "Unable to parse '"+key+"': "+errNonString)
	}
	return string(v.decodeString()), nil
}

func has(obj jval, key string) bool {
	_, ok := obj.get(key, false)
	return ok
}

// parseTritonInput reads one element of "inputs", taking its binary block
// from bin at off; it returns the new offset.
func (s *Server) parseTritonInput(m *model, req *tritonRequest, ev jval, bin []byte, off int) (tritonInput, int, *httpError) {
	in := tritonInput{}
	params, hasParams := ev.get("parameters", false)
	hasData := has(ev, "data")
	hasBinary := hasParams && has(params, "binary_data_size")
	hasShm := hasParams && has(params, "shared_memory_region")
	if n := b2i(hasData) + b2i(hasBinary) + b2i(hasShm); n != 1 {
		msg := "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', " +
			"'shared_memory_region' in 'parameters'. But"
		if n == 0 {
			msg += " no field is set"
		} else {
			msg += " set"
			if hasData {
				msg += " 'data'"
			}
			if hasBinary {
				msg += " 'binary_data_size'"
			}
			if hasShm {
				msg += " 'shared_memory_region'"
			}
		}
		return in, off, errorJSON(http.StatusBadRequest, msg)
	}
	var herr *httpError
	if in.name, herr = memberString(ev, "name"); herr != nil {
		return in, off, herr
	}
	if in.datatype, herr = memberString(ev, "datatype"); herr != nil {
		return in, off, herr
	}
	in.dtype, _ = tensor.ParseV2(in.datatype)
	shape, ok := ev.get("shape", false)
	switch {
	case !ok:
		return in, off, errorJSON(http.StatusInternalServerError, "Unable to parse 'shape': "+errMissing("shape"))
	case shape.kind() != jArray:
		return in, off, errorJSON(http.StatusInternalServerError, "Unable to parse 'shape': "+errNonArray)
	}
	in.shape = []int64{}
	shape.elems(func(_ int, d jval) bool {
		n := d.number()
		if d.kind() != jNumber || !n.isUint64 {
			herr = errorJSON(http.StatusInternalServerError, "Unable to parse 'shape': "+errNonUint)
			return false
		}
		in.shape = append(in.shape, int64(n.u)) // > MaxInt64 wraps negative, as in Triton
		return true
	})
	if herr != nil {
		return in, off, herr
	}
	if req.inputNames[in.name] {
		return in, off, errorJSON(http.StatusBadRequest, req.logPrefix()+"input '"+in.name+"' already exists in request")
	}
	req.inputNames[in.name] = true
	switch {
	case hasBinary:
		v, _ := params.get("binary_data_size", false)
		n := v.number()
		if v.kind() != jNumber || !n.isUint64 {
			return in, off, errorJSON(http.StatusInternalServerError, "Unable to parse 'binary_data_size': "+errNonUint)
		}
		if rem := uint64(len(bin) - off); n.u > rem {
			return in, len(bin), errorJSON(http.StatusBadRequest, "unexpected size for input '"+in.name+"', expecting "+
				strconv.FormatUint(n.u-rem, 10)+" additional bytes for model '"+m.name+"'")
		}
		in.raw = bin[off : off+int(n.u) : off+int(n.u)]
		off += int(n.u)
	case hasShm:
		v, _ := params.get("shared_memory_region", false)
		if v.kind() != jString {
			return in, off, errorJSON(http.StatusInternalServerError, "Unable to parse 'shared_memory_region': "+errNonString)
		}
		return in, off, errorJSON(http.StatusBadRequest, "Unable to find shared memory region: '"+string(v.decodeString())+"'")
	default:
		cnt, ok := elementCount(in.shape)
		if !ok {
			cnt = math.MaxInt64 // no data can fill it
		}
		if cnt == 0 {
			break // Triton reads no data at all for zero elements
		}
		data, _ := ev.get("data", false)
		if data.kind() != jArray {
			return in, off, errorJSON(http.StatusInternalServerError, "Unable to parse 'data': "+errNonArray)
		}
		if in.raw, herr = s.tritonJSONData(in.name, in.dtype, data, cnt); herr != nil {
			return in, off, herr
		}
	}
	return in, off, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// tritonJSONData serializes JSON "data" into tensor bytes as
// ReadDataFromJson does. It walks twice: first counting and type-checking
// leaves with Triton's error order, then filling a buffer whose size the
// first walk proved, so a shape the data cannot fill allocates nothing.
func (s *Server) tritonJSONData(name string, dt tensor.DataType, data jval, cnt int64) ([]byte, *httpError) {
	depthMsg := "JSON nesting depth exceeds maximum allowed limit (" + strconv.Itoa(s.limits.MaxDepth) + ")"
	walk := func(visit func(jval) error) (*httpError, bool) {
		err := walkLeaves(data, s.limits.MaxDepth, visit)
		var we walkError
		switch {
		case err == nil:
			return nil, false
		case errors.As(err, &we):
			return we.e, false
		}
		return nil, true // too deep
	}
	switch dt {
	case tensor.Bytes:
		size := 0
		herr, deep := walk(func(leaf jval) error {
			if leaf.kind() != jString {
				return walkError{errorJSON(http.StatusInternalServerError, "Unable to parse JSON bytes array: "+errNonString)}
			}
			size += 4 + len(leaf.decodeString())
			return nil
		})
		if deep {
			return nil, errorJSON(http.StatusBadRequest, depthMsg)
		}
		if herr != nil {
			return nil, herr
		}
		out := make([]byte, 0, size)
		walk(func(leaf jval) error {
			str := leaf.decodeString()
			out = binary.LittleEndian.AppendUint32(out, uint32(len(str)))
			out = append(out, str...)
			return nil
		})
		return out, nil
	case tensor.FP16, tensor.BF16:
		return nil, errorJSON(http.StatusBadRequest, "receiving "+dt.String()+
			" data via JSON is not supported. Please use the binary data format for input "+name)
	case tensor.Invalid:
		return nil, errorJSON(http.StatusBadRequest, "invalid datatype for input "+name)
	}
	counter := int64(0)
	herr, deep := walk(func(leaf jval) error {
		if counter >= cnt {
			return walkError{errorJSON(http.StatusInternalServerError,
				"Unable to parse 'data': Shape does not match true shape of 'data' field")}
		}
		if what := tritonLeafError(dt, leaf); what != "" {
			return walkError{errorJSON(http.StatusInternalServerError, "Unable to parse 'data': "+what)}
		}
		counter++
		return nil
	})
	if deep {
		return nil, errorJSON(http.StatusBadRequest, "Unable to parse 'data': "+depthMsg)
	}
	if herr != nil {
		return nil, herr
	}
	if counter != cnt {
		return nil, errorJSON(http.StatusInternalServerError, "Failed to parse 'data' field: shape does not match true shape")
	}
	size := dt.Size()
	out := make([]byte, int(cnt)*size)
	i := 0
	walk(func(leaf jval) error {
		putJSONElem(out[i*size:], dt, leaf)
		i++
		return nil
	})
	return out, nil
}

// tritonLeafError is the TritonJson text for a leaf of the wrong type.
func tritonLeafError(dt tensor.DataType, leaf jval) string {
	switch dt {
	case tensor.Bool:
		if leaf.kind() != jBool {
			return errNonBool
		}
	case tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64:
		if leaf.kind() != jNumber || !leaf.number().isUint64 {
			return errNonUint
		}
	case tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64:
		if leaf.kind() != jNumber || !leaf.number().isInt64 {
			return errNonInt
		}
	case tensor.FP32, tensor.FP64:
		if leaf.kind() != jNumber {
			return errNonNumber
		}
	}
	return ""
}

// putJSONElem stores a type-checked leaf little-endian, truncating
// integers to the element width as Triton's C casts do.
func putJSONElem(d []byte, dt tensor.DataType, leaf jval) {
	if dt == tensor.Bool {
		d[0] = byte(b2i(leaf.isTrue()))
		return
	}
	n := leaf.number()
	switch dt {
	case tensor.Uint8:
		d[0] = byte(n.u)
	case tensor.Int8:
		d[0] = byte(n.i)
	case tensor.Uint16:
		binary.LittleEndian.PutUint16(d, uint16(n.u))
	case tensor.Int16:
		binary.LittleEndian.PutUint16(d, uint16(n.i))
	case tensor.Uint32:
		binary.LittleEndian.PutUint32(d, uint32(n.u))
	case tensor.Int32:
		binary.LittleEndian.PutUint32(d, uint32(n.i))
	case tensor.Uint64:
		binary.LittleEndian.PutUint64(d, n.u)
	case tensor.Int64:
		binary.LittleEndian.PutUint64(d, uint64(n.i))
	case tensor.FP32:
		binary.LittleEndian.PutUint32(d, math.Float32bits(float32(n.f)))
	case tensor.FP64:
		binary.LittleEndian.PutUint64(d, math.Float64bits(n.f))
	}
}

func parseTritonOutput(req *tritonRequest, e jval) *httpError {
	params, hasParams := e.get("parameters", false)
	if hasParams && has(params, "shared_memory_region") {
		v, _ := params.get("shared_memory_region", false)
		if v.kind() != jString {
			return errorJSON(http.StatusInternalServerError, "Unable to parse 'shared_memory_region': "+errNonString)
		}
		return errorJSON(http.StatusBadRequest, "Unable to find shared memory region: '"+string(v.decodeString())+"'")
	}
	name, herr := memberString(e, "name")
	if herr != nil {
		return herr
	}
	if req.outputNames[name] {
		return errorJSON(http.StatusBadRequest, "output '"+name+"' already exists in request")
	}
	req.outputNames[name] = true
	out := tritonOutput{name: name}
	if hasParams {
		if c, ok := params.get("classification", false); ok {
			n := c.number()
			if c.kind() != jNumber || !n.isUint64 {
				return errorJSON(http.StatusInternalServerError, "Unable to set 'classification': "+errNonUint)
			}
			if n.u > 0 {
				return errorJSON(http.StatusNotImplemented, "mock: the classification extension is not implemented")
			}
		}
		if b, ok := params.get("binary_data", false); ok {
			if b.kind() != jBool {
				return errorJSON(http.StatusInternalServerError, "Unable to parse 'binary_data': "+errNonBool)
			}
			out.binary = b.isTrue()
		}
	}
	req.outputs = append(req.outputs, out)
	return nil
}

// rawInput fills in the single input of a raw binary request from the
// model configuration (InferenceRequest::Normalize's raw-input branch).
func rawInput(m *model, req *tritonRequest) *httpError {
	prefix := req.logPrefix()
	if len(m.inputs) != 1 {
		return errorJSON(http.StatusBadRequest, prefix+"Raw request must only have 1 input (found 1) to be deduced but got "+
			strconv.Itoa(len(m.inputs))+" inputs in '"+m.name+"' model configuration")
	}
	sp := m.inputs[0]
	in := &req.inputs[0]
	var shape []int64
	if m.maxBatch != 0 {
		shape = append(shape, 1)
	}
	dyn, fixed := -1, int64(1)
	for _, d := range sp.Shape {
		if d == -1 {
			if dyn != -1 {
				return errorJSON(http.StatusBadRequest, prefix+"The shape of the raw input '"+sp.Name+
					"' can not be deduced because there are more than one variable-sized dimension")
			}
			dyn = len(shape)
		} else {
			fixed *= d
		}
		shape = append(shape, d)
	}
	if sp.DataType == tensor.Bytes {
		if dyn != -1 || fixed != 1 {
			return errorJSON(http.StatusBadRequest, prefix+"For BYTE datatype raw input '"+sp.Name+
				"', the model must have input shape [1]")
		}
		in.raw = append(binary.LittleEndian.AppendUint32(nil, uint32(len(in.raw))), in.raw...)
	} else if dyn != -1 {
		shape[dyn] = int64(len(in.raw)) / fixed / int64(sp.DataType.Size())
	}
	in.inputDesc = inputDesc{name: sp.Name, datatype: sp.DataType.String(), dtype: sp.DataType, shape: shape}
	return nil
}

// tritonCore applies the core's request checks and builds the model inputs.
func tritonCore(m *model, req *tritonRequest) ([]tensor.Tensor, *httpError) {
	prefix := req.logPrefix()
	for _, o := range req.outputs {
		if i, _ := m.output(o.name); i < 0 {
			return nil, errorJSON(http.StatusBadRequest, "unexpected inference output '"+o.name+"' for model '"+m.name+"'")
		}
	}
	descs := make([]inputDesc, len(req.inputs))
	for i, in := range req.inputs {
		descs[i] = in.inputDesc
		if in.dtype == tensor.Invalid {
			descs[i].datatype = "INVALID"
		}
	}
	order, msg := normalize(m, descs, prefix, true)
	if msg != "" {
		return nil, errorJSON(http.StatusBadRequest, msg)
	}
	out := make([]tensor.Tensor, len(m.inputs))
	for mi, ri := range order {
		in := &req.inputs[ri]
		t := tensor.Tensor{Name: in.name, DataType: in.dtype, Shape: in.shape}
		cnt, ok := elementCount(in.shape)
		if in.dtype == tensor.Bytes {
			if !ok {
				cnt = math.MaxInt64
			}
			strs, msg := splitStrings(in.raw, cnt, "inference input '"+in.name+"' for model '"+m.name+"'")
			if msg != "" {
				return nil, errorJSON(http.StatusBadRequest, prefix+msg)
			}
			t.Strings = strs
		} else {
			want := int64(math.MaxInt64)
			if ok && cnt <= math.MaxInt64/int64(in.dtype.Size()) {
				want = cnt * int64(in.dtype.Size())
			}
			if int64(len(in.raw)) != want {
				return nil, errorJSON(http.StatusBadRequest, prefix+"input byte size mismatch for input '"+in.name+
					"' for model '"+m.name+"'. Expected "+strconv.FormatInt(want, 10)+", got "+strconv.Itoa(len(in.raw)))
			}
			t.Data = in.raw
		}
		out[mi] = t
	}
	return out, nil
}

// tritonResponse encodes outputs as FinalizeResponse does: JSON keys id
// (only when the request had one), model_name, model_version, outputs;
// binary outputs carry binary_data_size and their bytes follow the JSON in
// output order; the IHCL header and application/octet-stream only when
// some binary output is non-empty.
func tritonResponse(r *http.Request, m *model, req *tritonRequest, out []tensor.Tensor) (*reply, *httpError) {
	type sel struct {
		t      *tensor.Tensor
		binary bool
	}
	var sels []sel
	if len(req.outputs) > 0 {
		for _, o := range req.outputs {
			i, _ := m.output(o.name)
			sels = append(sels, sel{&out[i], o.binary})
		}
	} else {
		for i := range out {
			sels = append(sels, sel{&out[i], req.binaryAll})
		}
	}
	b := []byte{'{'}
	if req.id != "" {
		b = append(b, `"id":`...)
		b = appendJSONString(b, []byte(req.id), true)
		b = append(b, ',')
	}
	b = append(b, `"model_name":`...)
	b = appendJSONString(b, []byte(m.name), true)
	b = append(b, `,"model_version":"`+tritonModelVersion+`","outputs":[`...)
	var blobs [][]byte
	for i, sl := range sels {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendJSONString(b, []byte(sl.t.Name), true)
		b = append(b, `,"datatype":"`+sl.t.DataType.String()+`","shape":`...)
		b = appendShape(b, sl.t.Shape)
		if sl.binary {
			data := binaryBytes(sl.t)
			b = append(b, `,"parameters":{"binary_data_size":`...)
			b = strconv.AppendInt(b, int64(len(data)), 10)
			b = append(b, "}}"...)
			if len(data) > 0 {
				blobs = append(blobs, data)
			}
			continue
		}
		var herr *httpError
		if b, herr = appendTritonData(b, sl.t); herr != nil {
			return nil, herr
		}
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	header := http.Header{"Content-Type": {"application/json"}}
	if len(blobs) > 0 {
		header.Set("Content-Type", "application/octet-stream")
		header.Set(tritonIHCL, strconv.Itoa(len(b)))
		for _, blob := range blobs {
			b = append(b, blob...)
		}
	}
	switch tritonResponseEncoding(r.Header.Get("Accept-Encoding")) {
	case "gzip":
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(b)
		_ = zw.Close()
		b = buf.Bytes()
		header.Set("Content-Encoding", "gzip")
	case "deflate":
		var buf bytes.Buffer
		zw := zlib.NewWriter(&buf)
		_, _ = zw.Write(b)
		_ = zw.Close()
		b = buf.Bytes()
		header.Set("Content-Encoding", "deflate")
	}
	return &reply{status: http.StatusOK, header: header, body: b}, nil
}

// appendTritonData appends ,"data":[...] as WriteDataToJson writes it.
func appendTritonData(b []byte, t *tensor.Tensor) ([]byte, *httpError) {
	if t.DataType == tensor.FP16 || t.DataType == tensor.BF16 {
		return b, errorJSON(http.StatusBadRequest, "sending "+t.DataType.String()+
			" data via JSON is not supported. Please use the binary data format for output")
	}
	b = append(b, `,"data":[`...)
	n := numElems(t)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		switch t.DataType {
		case tensor.Bool:
			if t.Data[i] != 0 {
				b = append(b, "true"...)
			} else {
				b = append(b, "false"...)
			}
		case tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64:
			b = strconv.AppendUint(b, t.Uint64At(i), 10)
		case tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64:
			b = strconv.AppendInt(b, t.Int64At(i), 10)
		case tensor.FP32, tensor.FP64:
			b = appendRapidDouble(b, t.Float64At(i))
		case tensor.Bytes:
			b = appendJSONString(b, t.Strings[i], true)
		}
	}
	return append(b, ']'), nil
}

// tritonResponseEncoding picks identity, gzip or deflate from
// Accept-Encoding with the highest q as CompressionTypeUsed does.
func tritonResponseEncoding(accept string) string {
	if accept == "" {
		return "identity"
	}
	res, weight := "identity", 0.0
	for _, enc := range strings.Split(accept, ",") {
		start := strings.IndexFunc(enc, func(r rune) bool { return r != ' ' })
		wpos := strings.Index(enc, ";q=")
		if start < 0 || (wpos >= 0 && start >= wpos) {
			continue
		}
		typ, w := enc[start:], 1.0
		if wpos >= 0 {
			typ = enc[start:wpos]
			var ok bool
			if w, ok = parseStod(enc[wpos+3:]); !ok {
				continue
			}
		}
		if (typ == "identity" || typ == "deflate" || typ == "gzip") && w > weight {
			res, weight = typ, w
		}
	}
	return res
}

// parseStod is std::stod: the longest numeric prefix after white space.
func parseStod(s string) (float64, bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	for end := len(s); end > 0; end-- {
		if f, err := strconv.ParseFloat(s[:end], 64); err == nil {
			return f, true
		}
	}
	return 0, false
}
