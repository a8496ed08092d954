package mockv2

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// KServe and MLServer are FastAPI applications: a JSON body is validated
// against a pydantic InferenceRequest before the endpoint runs, and a
// failure is a 422 {"detail": [...]} listing pydantic v2 errors. This file
// holds what the two share.

// pyInput is one request input as the Python servers read it.
type pyInput struct {
	name     string
	datatype string
	shape    []int64
	params   jval // an object, or nil
	data     jval // nil when absent
}

type pyOutput struct {
	name   string
	params jval
}

type pyRequest struct {
	id      string
	params  jval
	inputs  []pyInput
	outputs []pyOutput
}

// detailItem is one pydantic v2 error as FastAPI reports it.
type detailItem struct {
	Type  string `json:"type"`
	Loc   []any  `json:"loc"`
	Msg   string `json:"msg"`
	Input any    `json:"input"`
	Ctx   any    `json:"ctx,omitempty"`
}

// detailInput embeds a request value in an error item as itself when it is
// standard JSON (a NaN token is not).
func detailInput(v jval) any {
	if json.Valid(v) {
		return json.RawMessage(v)
	}
	return string(v)
}

func loc(parts ...any) []any { return append([]any{"body"}, parts...) }

// jsonInvalid is FastAPI's 422 for a body json.loads rejected.
func jsonInvalid(err *scanError) *httpError {
	return detailJSON(http.StatusUnprocessableEntity, []detailItem{{
		Type: "json_invalid", Loc: loc(err.Off), Msg: "JSON decode error",
		Input: map[string]any{}, Ctx: map[string]string{"error": err.pythonMessage()},
	}})
}

// notJSONBody is FastAPI's 422 when the body was not parsed as JSON (a
// non-JSON Content-Type) and so is not an object. The echoed input is cut
// to 256 bytes: FastAPI echoes it whole, which a mock need not copy.
func notJSONBody(body []byte) *httpError {
	if len(body) > 256 {
		body = body[:256]
	}
	return detailJSON(http.StatusUnprocessableEntity, []detailItem{{
		Type: "model_attributes_type", Loc: loc(),
		Msg:   "Input should be a valid dictionary or object to extract fields from",
		Input: strings.ToValidUTF8(string(body), "\uFFFD"),
	}})
}

// mlserverDatatypes is MLServer's Datatype enum, in its order.
var mlserverDatatypes = []string{"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
	"FP16", "FP32", "FP64", "BYTES"}

// enumExpected is pydantic's "'A', 'B' or 'C'".
func enumExpected(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = "'" + v + "'"
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// validator collects pydantic errors for one request body.
type validator struct {
	items    []detailItem
	mlserver bool
}

func (v *validator) add(typ string, l []any, msg string, input jval) {
	v.items = append(v.items, detailItem{Type: typ, Loc: l, Msg: msg, Input: detailInput(input)})
}

func (v *validator) missing(l []any, parent jval) {
	v.add("missing", l, "Field required", parent)
}

// str validates a required (or optional) str field.
func (v *validator) str(obj jval, key string, l []any, required bool) (string, bool) {
	f, ok := obj.get(key, true)
	switch {
	case !ok || (!required && f.kind() == jNull):
		if required {
			v.missing(l, obj)
		}
		return "", false
	case f.kind() != jString:
		v.add("string_type", l, "Input should be a valid string", f)
		return "", false
	}
	return string(f.decodeString()), true
}

// dict validates an optional parameters object.
func (v *validator) dict(obj jval, key string, l []any) jval {
	f, ok := obj.get(key, true)
	if !ok || f.kind() == jNull {
		return nil
	}
	if f.kind() != jObject {
		if v.mlserver {
			v.add("model_type", l, "Input should be a valid dictionary or instance of Parameters", f)
		} else {
			v.add("dict_type", l, "Input should be a valid dictionary", f)
		}
		return nil
	}
	return f
}

// shape validates List[int] in pydantic's lax mode: integers, integral
// floats and integer strings.
func (v *validator) shape(obj jval, l []any) []int64 {
	f, ok := obj.get("shape", true)
	if !ok {
		v.missing(l, obj)
		return nil
	}
	if f.kind() != jArray {
		v.add("list_type", l, "Input should be a valid list", f)
		return nil
	}
	shape := []int64{}
	f.elems(func(i int, e jval) bool {
		el := append(l[:len(l):len(l)], i)
		switch e.kind() {
		case jNumber:
			n := e.number()
			switch {
			case n.isInt64:
				shape = append(shape, n.i)
			case n.isInt:
				v.add("int_parsing_size", el, "Unable to parse input string as an integer, exceeded maximum size", e)
			case n.f == math.Trunc(n.f) && !math.IsInf(n.f, 0) && math.Abs(n.f) < 1<<63:
				shape = append(shape, int64(n.f))
			default:
				v.add("int_from_float", el, "Input should be a valid integer, got a number with a fractional part", e)
			}
		case jString:
			if d, err := strconv.ParseInt(strings.TrimSpace(string(e.decodeString())), 10, 64); err == nil {
				shape = append(shape, d)
			} else {
				v.add("int_parsing", el, "Input should be a valid integer, unable to parse string as an integer", e)
			}
		default:
			v.add("int_type", el, "Input should be a valid integer", e)
		}
		return true
	})
	return shape
}

// pydanticRequest validates a decoded body against the servers'
// InferenceRequest model (fields id, parameters, inputs, outputs; inputs
// name, shape, datatype, parameters, data), in pydantic's field order.
// MLServer restricts datatype to its enum and accepts any data; KServe
// wants data to be a list. Python dicts keep the last duplicate key.
func pydanticRequest(doc jval, mlserver bool) (*pyRequest, []detailItem) {
	v := &validator{mlserver: mlserver}
	if doc.kind() != jObject {
		v.add("model_attributes_type", loc(), "Input should be a valid dictionary or object to extract fields from", doc)
		return nil, v.items
	}
	req := &pyRequest{}
	req.id, _ = v.str(doc, "id", loc("id"), false)
	req.params = v.dict(doc, "parameters", loc("parameters"))
	inputs, ok := doc.get("inputs", true)
	switch {
	case !ok:
		v.missing(loc("inputs"), doc)
	case inputs.kind() != jArray:
		v.add("list_type", loc("inputs"), "Input should be a valid list", inputs)
	default:
		inputs.elems(func(i int, e jval) bool {
			l := func(f string) []any { return loc("inputs", i, f) }
			if e.kind() != jObject {
				v.add("model_type", loc("inputs", i), "Input should be a valid dictionary or instance of RequestInput", e)
				return true
			}
			var in pyInput
			in.name, _ = v.str(e, "name", l("name"), true)
			in.shape = v.shape(e, l("shape"))
			if dt, ok := v.str(e, "datatype", l("datatype"), true); ok {
				in.datatype = dt
				if mlserver && !contains(mlserverDatatypes, dt) {
					exp := enumExpected(mlserverDatatypes)
					v.items = append(v.items, detailItem{Type: "enum", Loc: l("datatype"), Msg: "Input should be " + exp,
						Input: detailInput(mustField(e, "datatype")), Ctx: map[string]string{"expected": exp}})
				}
			}
			in.params = v.dict(e, "parameters", l("parameters"))
			if d, ok := e.get("data", true); !ok {
				v.missing(l("data"), e)
			} else if !mlserver && d.kind() != jArray {
				v.add("list_type", l("data"), "Input should be a valid list", d)
			} else {
				in.data = d
			}
			req.inputs = append(req.inputs, in)
			return true
		})
	}
	if outs, ok := doc.get("outputs", true); ok && outs.kind() != jNull {
		if outs.kind() != jArray {
			v.add("list_type", loc("outputs"), "Input should be a valid list", outs)
		} else {
			outs.elems(func(i int, e jval) bool {
				if e.kind() != jObject {
					v.add("model_type", loc("outputs", i), "Input should be a valid dictionary or instance of RequestOutput", e)
					return true
				}
				var o pyOutput
				o.name, _ = v.str(e, "name", loc("outputs", i, "name"), true)
				o.params = v.dict(e, "parameters", loc("outputs", i, "parameters"))
				req.outputs = append(req.outputs, o)
				return true
			})
		}
	}
	if len(v.items) > 0 {
		return nil, v.items
	}
	return req, nil
}

func mustField(obj jval, key string) jval {
	f, _ := obj.get(key, true)
	return f
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// isJSONContentType reports whether FastAPI parses a body with this
// Content-Type as JSON. absentIsJSON reflects FastAPI before 0.132, which
// also parsed bodies without one.
func isJSONContentType(ct string, absentIsJSON bool) bool {
	if strings.TrimSpace(ct) == "" {
		return absentIsJSON
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// uuid4 is a random RFC 4122 version 4 UUID, the id both servers invent
// when a request has none.
func uuid4() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0F | 0x40
	b[8] = b[8]&0x3F | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// appendPyData appends the elements of t as a flat JSON list the way
// orjson writes numpy values turned into Python objects: integers, floats
// as repr (NaN and infinities as null), booleans, and BYTES as strings,
// which must be UTF-8 (ok is false otherwise, with the offending element).
func appendPyData(b []byte, t *tensor.Tensor) (_ []byte, bad []byte, ok bool) {
	b = append(b, '[')
	for i := range numElems(t) {
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
		case tensor.FP16, tensor.FP32, tensor.FP64, tensor.BF16:
			b = appendPyFloat(b, t.Float64At(i))
		case tensor.Bytes:
			if !utf8.Valid(t.Strings[i]) {
				return b, t.Strings[i], false
			}
			b = appendJSONString(b, t.Strings[i], false)
		}
	}
	return append(b, ']'), nil, true
}

// pySlice is Python's seq[lo:hi] bounds for a sequence of length n.
func pySlice(n int, lo, hi int64) (int, int) {
	clamp := func(i int64) int {
		if i < 0 {
			i += int64(n)
			if i < 0 {
				i = 0
			}
		}
		if i > int64(n) {
			i = int64(n)
		}
		return int(i)
	}
	a, z := clamp(lo), clamp(hi)
	if z < a {
		z = a
	}
	return a, z
}

// pyInt is Python's int(str): surrounding white space, a sign, digits with
// single underscores between them.
func pyInt(s string) (int64, bool) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "_") || strings.HasSuffix(t, "_") || strings.Contains(t, "__") {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(t, "_", ""), 10, 64)
	return n, err == nil
}
