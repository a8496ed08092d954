package mockv2

import (
	"encoding/base64"
	"net/http"
	"unicode/utf8"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// This file imitates MLServer 1.7 (mlserver/rest/endpoints.py, the pydantic
// types in mlserver/types, NumpyCodec, StringCodec, Base64Codec): JSON only,
// no binary extension, nulls omitted, NaN written as null and 1-D outputs
// reported with a trailing dimension of 1.

func (s *Server) mlserverInfer(r *http.Request, ref modelRef) (*reply, *httpError) {
	body, herr := s.readBody(r)
	if herr != nil {
		return nil, herr
	}
	if !isJSONContentType(r.Header.Get("Content-Type"), true) {
		// FastAPI hands the raw bytes to pydantic, which wants an object:
		// this is how a binary-extension request fails on MLServer.
		return nil, notJSONBody(body)
	}
	doc, serr := scanDocument(body, dialectPython)
	if serr != nil {
		return nil, jsonInvalid(serr)
	}
	req, items := pydanticRequest(doc, true)
	if items != nil {
		return nil, detailJSON(http.StatusUnprocessableEntity, items)
	}
	m, herr := s.lookup(ref)
	if herr != nil {
		return nil, herr
	}
	in := make([]tensor.Tensor, 0, len(req.inputs))
	for _, pin := range req.inputs {
		dt, _ := tensor.ParseV2(pin.datatype) // the enum was validated
		b64 := false
		if ct, ok := pin.params.get("content_type", true); ok && ct.kind() == jString {
			b64 = string(ct.decodeString()) == "base64"
		}
		t, exc := pyCoerce(pin.name, dt, pin.shape, pin.data, b64)
		if exc != nil {
			// An unhandled exception: Starlette's plain-text 500.
			s.log.Debug("mockv2 mlserver decode failed", "input", pin.name, "error", exc.text())
			return nil, internalText()
		}
		in = append(in, t)
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
	return mlserverResponse(m, out, id), nil
}

// mlserverResponse writes every output (MLServer runtimes ignore the
// requested-output list) with MLServer's field order and codecs: numeric
// tensors through NumpyCodec ({"content_type":"np"}, a 1-D [N] reported as
// [N,1]); BYTES through StringCodec ({"content_type":"str"}) when every
// element is UTF-8, else Base64Codec ({"content_type":"base64"}).
func mlserverResponse(m *model, out []tensor.Tensor, id string) *reply {
	b := []byte(`{"model_name":`)
	b = appendJSONString(b, []byte(m.name), false)
	b = append(b, `,"model_version":"`+mlserverModelVersion+`","id":`...)
	b = appendJSONString(b, []byte(id), false)
	b = append(b, `,"outputs":[`...)
	for i := range out {
		t := &out[i]
		if i > 0 {
			b = append(b, ',')
		}
		shape := t.Shape
		if len(shape) == 1 {
			shape = []int64{shape[0], 1}
		}
		b = append(b, `{"name":`...)
		b = appendJSONString(b, []byte(t.Name), false)
		b = append(b, `,"shape":`...)
		b = appendShape(b, shape)
		b = append(b, `,"datatype":"`+t.DataType.String()+`","parameters":{"content_type":"`...)
		if t.DataType != tensor.Bytes {
			b = append(b, `np"},"data":`...)
			b, _, _ = appendPyData(b, t)
			b = append(b, '}')
			continue
		}
		allUTF8 := true
		for _, s := range t.Strings {
			allUTF8 = allUTF8 && utf8.Valid(s)
		}
		if allUTF8 {
			b = append(b, `str"},"data":`...)
			b, _, _ = appendPyData(b, t)
		} else {
			b = append(b, `base64"},"data":[`...)
			for j, s := range t.Strings {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, '"')
				b = base64.StdEncoding.AppendEncode(b, s)
				b = append(b, '"')
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	return jsonReply(b)
}
