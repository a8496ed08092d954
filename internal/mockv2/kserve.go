package mockv2

import (
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// This file imitates KServe's Python model server (kserve 0.20:
// protocol/rest/v2_endpoints.py, dataplane.py decode_inference_request,
// infer_type.py InferRequest.from_bytes and InferResponse.to_rest) serving
// a custom model that declares its tensors.

const kserveIHCL = "inference-header-content-length"

// kserveException answers an exception KServe's generic handler catches.
func kserveException(e *pyException) *httpError {
	return errorJSON(http.StatusInternalServerError, e.text())
}

func (s *Server) kserveInfer(r *http.Request, ref modelRef) (*reply, *httpError) {
	body, herr := s.readBody(r)
	if herr != nil {
		return nil, herr
	}
	var (
		m   *model
		in  []tensor.Tensor
		req *pyRequest
	)
	if isJSONContentType(r.Header.Get("Content-Type"), true) {
		// FastAPI validates the body before the endpoint runs, so a bad
		// body is a 422 even for an unknown model.
		doc, serr := scanDocument(body, dialectPython)
		if serr != nil {
			return nil, jsonInvalid(serr)
		}
		var items []detailItem
		if req, items = pydanticRequest(doc, false); items != nil {
			return nil, detailJSON(http.StatusUnprocessableEntity, items)
		}
		if m, herr = s.lookup(ref); herr != nil {
			return nil, herr
		}
		for _, pin := range req.inputs {
			if pin.datatype == "FP16" && pin.data.arrayLen() != 0 {
				return nil, errorJSON(http.StatusBadRequest, "Sending FP16 data via JSON is not supported. "+
					"Please use the binary data format for input "+pin.name)
			}
		}
		for _, pin := range req.inputs {
			t, herr := kserveDecode(pin.name, pin.datatype, pin.shape, func(dt tensor.DataType, shape []int64) (tensor.Tensor, *pyException) {
				return pyCoerce(pin.name, dt, shape, pin.data, false)
			})
			if herr != nil {
				return nil, herr
			}
			in = append(in, t)
		}
	} else {
		if m, herr = s.lookup(ref); herr != nil {
			return nil, herr
		}
		if req, in, herr = kserveBytes(r, m, body); herr != nil {
			return nil, herr
		}
	}
	ordered, herr := checkPyInputs(m, in)
	if herr != nil {
		return nil, herr
	}
	out, herr, ok := s.execute(r, m, ordered)
	if herr != nil || !ok {
		return nil, herr
	}
	id := req.id
	if id == "" {
		id = uuid4()
	}
	return kserveResponse(m, req, out, id)
}

// kserveDecode is InferInput.as_numpy for one input: the datatype must map
// to a numpy dtype (KServe upper-cases it; BF16 has none), then decode
// builds the array.
func kserveDecode(name, datatype string, shape []int64,
	decode func(tensor.DataType, []int64) (tensor.Tensor, *pyException)) (tensor.Tensor, *httpError) {
	dt, ok := tensor.ParseV2(strings.ToUpper(datatype))
	if !ok || dt == tensor.BF16 {
		return tensor.Tensor{}, errorJSON(http.StatusBadRequest, "invalid datatype None in the input")
	}
	t, exc := decode(dt, shape)
	if exc != nil {
		return t, kserveException(exc)
	}
	return t, nil
}

// checkPyInputs validates decoded inputs against the model, as the mock's
// custom models do (Triton's texts without its request-id prefix), and
// orders them like the model's inputs.
func checkPyInputs(m *model, in []tensor.Tensor) ([]tensor.Tensor, *httpError) {
	descs := make([]inputDesc, len(in))
	for i, t := range in {
		descs[i] = inputDesc{name: t.Name, datatype: t.DataType.String(), dtype: t.DataType, shape: t.Shape}
	}
	order, msg := normalize(m, descs, "", false)
	if msg != "" {
		return nil, errorJSON(http.StatusBadRequest, msg)
	}
	out := make([]tensor.Tensor, len(order))
	for mi, ri := range order {
		out[mi] = in[ri]
	}
	return out, nil
}

// kserveBytes is InferRequest.from_bytes: the JSON header is the first
// inference-header-content-length bytes (Python slicing, so out-of-range
// values clamp), parsed by orjson; binary inputs slice the rest in order.
func kserveBytes(r *http.Request, m *model, body []byte) (*pyRequest, []tensor.Tensor, *httpError) {
	vals := r.Header.Values(kserveIHCL)
	if len(vals) == 0 {
		return nil, nil, errorJSON(http.StatusBadRequest, "received byte inputs, but the'inference-header-content-length' header is missing.")
	}
	n, ok := pyInt(vals[0])
	if !ok {
		return nil, nil, kserveException(&pyException{"ValueError", "invalid literal for int() with base 10: " + pyStrRepr(vals[0])})
	}
	_, jsonEnd := pySlice(len(body), 0, n)
	doc, serr := scanDocument(body[:jsonEnd], dialectStrict)
	if serr != nil {
		return nil, nil, errorJSON(http.StatusBadRequest, "Unrecognized request format: "+serr.orjsonMessage())
	}
	if doc.kind() != jObject {
		msg := "'" + doc.pythonType() + "' object is not subscriptable"
		if doc.kind() == jArray {
			msg = "list indices must be integers or slices, not str"
		}
		return nil, nil, kserveException(&pyException{"TypeError", msg})
	}
	keyErr := func(k string) *httpError { return kserveException(&pyException{"KeyError", "'" + k + "'"}) }
	inputs, ok := doc.get("inputs", true)
	if !ok {
		return nil, nil, keyErr("inputs")
	}
	if inputs.kind() != jArray {
		return nil, nil, kserveException(&pyException{"TypeError", "'" + inputs.pythonType() + "' object is not iterable"})
	}
	req := &pyRequest{}
	if id, ok := doc.get("id", true); ok && id.kind() == jString {
		req.id = string(id.decodeString())
	}
	if p, ok := doc.get("parameters", true); ok && p.kind() == jObject {
		req.params = p
	}
	var tensors []tensor.Tensor
	start := int64(jsonEnd)
	var herr *httpError
	inputs.elems(func(_ int, e jval) bool {
		if e.kind() != jObject {
			herr = kserveException(&pyException{"AttributeError", "'" + e.pythonType() + "' object has no attribute 'get'"})
			return false
		}
		params, _ := e.get("parameters", true)
		var name, datatype string
		var shape []int64
		for _, k := range []string{"name", "shape", "datatype"} {
			f, ok := e.get(k, true)
			if !ok {
				herr = keyErr(k)
				return false
			}
			switch k {
			case "name":
				name = pyStrOf(f)
			case "shape":
				shape, herr = pyShapeList(f)
			case "datatype":
				if f.kind() != jString {
					herr = kserveException(&pyException{"AttributeError", "'" + f.pythonType() + "' object has no attribute 'upper'"})
				} else {
					datatype = strings.ToUpper(string(f.decodeString()))
				}
			}
			if herr != nil {
				return false
			}
		}
		var t tensor.Tensor
		if data, ok := e.get("data", true); ok && data.kind() != jNull {
			if datatype == "FP16" {
				herr = errorJSON(http.StatusBadRequest, "Receiving FP16 data via JSON is not supported. "+
					"Please use the binary data format for input "+name)
				return false
			}
			t, herr = kserveDecode(name, datatype, shape, func(dt tensor.DataType, shape []int64) (tensor.Tensor, *pyException) {
				return pyCoerce(name, dt, shape, data, false)
			})
		} else if bds, ok := params.get("binary_data_size", true); ok && pyTruthy(params) {
			var size int64
			switch {
			case bds.kind() == jNull:
				herr = errorJSON(http.StatusBadRequest, "'binary_data_size' is not specified for input '"+name+"' for model '"+m.name+"'")
			case bds.kind() == jBool:
				size = int64(b2i(bds.isTrue()))
			case bds.kind() == jNumber && bds.number().isInt64:
				size = bds.number().i
			default:
				herr = kserveException(&pyException{"TypeError", "unsupported operand type(s) for +: 'int' and '" + bds.pythonType() + "'"})
			}
			if herr != nil {
				return false
			}
			lo, hi := pySlice(len(body), start, start+size)
			raw := body[lo:hi:hi]
			start += size
			t, herr = kserveDecode(name, datatype, shape, func(dt tensor.DataType, shape []int64) (tensor.Tensor, *pyException) {
				return pyFrombuffer(name, dt, shape, raw)
			})
			if herr == nil && t.DataType == tensor.Bytes {
				// set_data_from_numpy(binary_data=False) decodes each
				// element to str.
				for _, s := range t.Strings {
					if !utf8.Valid(s) {
						herr = errorJSON(http.StatusInternalServerError, "Failed to encode \""+pyBytesRepr(s)+
							"\" using UTF-8. Please use binary_data=True, if you want to pass a byte array.")
						break
					}
				}
			}
		} else {
			herr = errorJSON(http.StatusBadRequest, "'data' field is missing for input '"+name+"' for model '"+m.name+"'")
		}
		if herr != nil {
			return false
		}
		tensors = append(tensors, t)
		return true
	})
	if herr != nil {
		return nil, nil, herr
	}
	if outs, ok := doc.get("outputs", true); ok && outs.kind() == jArray {
		outs.elems(func(_ int, e jval) bool {
			f, ok := e.get("name", true)
			if !ok {
				herr = keyErr("name")
				return false
			}
			p, _ := e.get("parameters", true)
			req.outputs = append(req.outputs, pyOutput{name: pyStrOf(f), params: p})
			return true
		})
	}
	return req, tensors, herr
}

// pyShapeList reads a shape on the bytes path, where nothing validated it.
func pyShapeList(f jval) ([]int64, *httpError) {
	if f.kind() != jArray {
		return nil, kserveException(&pyException{"TypeError", "'" + f.pythonType() + "' object cannot be interpreted as an integer"})
	}
	var shape []int64
	var herr *httpError
	f.elems(func(_ int, e jval) bool {
		if e.kind() != jNumber || !e.number().isInt64 {
			herr = kserveException(&pyException{"TypeError", "'" + e.pythonType() + "' object cannot be interpreted as an integer"})
			return false
		}
		shape = append(shape, e.number().i)
		return true
	})
	return shape, herr
}

// kserveResponse is InferResponse.to_rest followed by the endpoint: listed
// outputs are answered in request order with their own binary_data (unset
// means JSON, whatever binary_data_output says), else every output with
// binary_data_output. Any binary output makes a binary body with a
// lowercase IHCL header, no Content-Type and chunked encoding; otherwise
// the pydantic JSON response with its explicit nulls.
func kserveResponse(m *model, req *pyRequest, out []tensor.Tensor, id string) (*reply, *httpError) {
	type sel struct {
		t      *tensor.Tensor
		binary bool
	}
	binaryAll := false
	if v, ok := req.params.get("binary_data_output", true); ok {
		binaryAll = pyTruthy(v)
	}
	var sels []sel
	if len(req.outputs) > 0 {
		for _, o := range req.outputs {
			i, _ := m.output(o.name)
			if i < 0 {
				return nil, errorJSON(http.StatusBadRequest, "Unexpected inference output '"+o.name+"' for model '"+m.name+"'")
			}
			bin := false
			if v, ok := o.params.get("binary_data", true); ok {
				bin = pyTruthy(v)
			}
			sels = append(sels, sel{&out[i], bin})
		}
	} else {
		for i := range out {
			sels = append(sels, sel{&out[i], binaryAll})
		}
	}
	anyBinary := false
	var items [][]byte // each output's JSON without its braces' tail
	var blobs [][]byte
	for _, sl := range sels {
		if sl.binary {
			anyBinary = true
			blobs = append(blobs, binaryBytes(sl.t))
			items = append(items, nil)
			continue
		}
		data, bad, ok := appendPyData(nil, sl.t)
		if !ok {
			return nil, errorJSON(http.StatusInternalServerError, "Failed to encode \""+pyBytesRepr(bad)+
				"\" using UTF-8. Please use binary_data=True, if you want to pass a byte array.")
		}
		if sl.t.DataType == tensor.FP16 {
			return nil, errorJSON(http.StatusBadRequest, "Sending FP16 data via JSON is not supported. "+
				"Please use the binary data format for output "+sl.t.Name)
		}
		items = append(items, data)
	}
	head := func(b []byte, t *tensor.Tensor) []byte {
		b = append(b, `{"name":`...)
		b = appendJSONString(b, []byte(t.Name), false)
		b = append(b, `,"shape":`...)
		b = appendShape(b, t.Shape)
		return append(b, `,"datatype":"`+t.DataType.String()+`"`...)
	}
	var b []byte
	if anyBinary {
		b = append(b, `{"id":`...)
		b = appendJSONString(b, []byte(id), false)
		b = append(b, `,"model_name":`...)
		b = appendJSONString(b, []byte(m.name), false)
		b = append(b, `,"model_version":null,"outputs":[`...)
		bi := 0
		for i, sl := range sels {
			if i > 0 {
				b = append(b, ',')
			}
			b = head(b, sl.t)
			if sl.binary {
				b = append(b, `,"parameters":{"binary_data_size":`...)
				b = strconv.AppendInt(b, int64(len(blobs[bi])), 10)
				b = append(b, "}}"...)
				bi++
				continue
			}
			b = append(b, `,"data":`...)
			b = append(b, items[i]...)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
		hl := len(b)
		for _, blob := range blobs {
			b = append(b, blob...)
		}
		return &reply{status: http.StatusOK, header: http.Header{kserveIHCL: {strconv.Itoa(hl)}}, body: b, flush: true}, nil
	}
	b = append(b, `{"model_name":`...)
	b = appendJSONString(b, []byte(m.name), false)
	b = append(b, `,"model_version":null,"id":`...)
	b = appendJSONString(b, []byte(id), false)
	b = append(b, `,"parameters":null,"outputs":[`...)
	for i, sl := range sels {
		if i > 0 {
			b = append(b, ',')
		}
		b = head(b, sl.t)
		b = append(b, `,"parameters":null,"data":`...)
		b = append(b, items[i]...)
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	return jsonReply(b), nil
}

// pyStrOf is str() of a JSON value: a string's text, else the literal.
func pyStrOf(v jval) string {
	if v.kind() == jString {
		return string(v.decodeString())
	}
	return string(pyStr(v, false))
}
