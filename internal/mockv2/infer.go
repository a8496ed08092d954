package mockv2

import (
	"context"
	"encoding/binary"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// infer answers POST .../infer with the kind's own request parsing,
// validation and response encoding. Triton looks the model up first; the
// Python servers validate a JSON body before their endpoint even runs.
func (s *Server) infer(r *http.Request, ref modelRef) (*reply, *httpError) {
	var (
		rep  *reply
		herr *httpError
	)
	switch s.kind {
	case kindKServe:
		rep, herr = s.kserveInfer(r, ref)
	case kindMLServer:
		rep, herr = s.mlserverInfer(r, ref)
	default:
		var m *model
		if m, herr = s.lookup(ref); herr == nil {
			rep, herr = s.tritonInfer(r, m)
		}
	}
	if herr != nil || rep == nil || !s.models[ref.name].garbage {
		return rep, herr
	}
	return s.mangle(r, rep)
}

// execute runs model m on inputs already validated and ordered like
// m.inputs. Model "slow" first waits Options.Delay; ok is false when the
// client went away meanwhile and nothing should be answered. A model that
// refuses its input answers 400 {"error": …} on every kind.
func (s *Server) execute(r *http.Request, m *model, in []tensor.Tensor) (out []tensor.Tensor, herr *httpError, ok bool) {
	return s.run(r.Context(), m, in)
}

// run is execute for a caller without an HTTP request (the gRPC service): ctx ends the
// wait of model "slow".
func (s *Server) run(ctx context.Context, m *model, in []tensor.Tensor) (out []tensor.Tensor, herr *httpError, ok bool) {
	if m.slow && !sleep(ctx, s.delay) {
		return nil, nil, false
	}
	if m.runErr != nil {
		var err error
		if out, err = m.runErr(in); err != nil {
			return nil, errorJSON(http.StatusBadRequest, err.Error()), true
		}
	} else {
		out = m.run(in)
	}
	for i := range out {
		out[i].Name = m.outputs[i].Name
	}
	if delta, ok := s.perturb[m.name]; ok {
		perturb(out, delta)
	}
	return out, nil, true
}

// inputDesc is what model validation needs to know of one request input.
type inputDesc struct {
	name     string
	datatype string // as sent, for messages
	dtype    tensor.DataType
	shape    []int64
}

// normalize checks request inputs against model m in the order and with
// the texts of Triton's InferenceRequest::Normalize, and returns for each
// model input the index of the request input feeding it. prefix is
// Triton's "[request id: …] " (empty for the other kinds, which use the
// same texts for the mock's model checks); note adds Triton's remark about
// max_batch_size to shape errors. A non-empty message is a 400.
func normalize(m *model, ins []inputDesc, prefix string, note bool) ([]int, string) {
	seen := make(map[string]bool, len(ins))
	for _, in := range ins {
		if seen[in.name] {
			return nil, prefix + "input '" + in.name + "' already exists in request"
		}
		seen[in.name] = true
	}
	if len(ins) != len(m.inputs) {
		var got, missing []string
		for _, in := range ins {
			got = append(got, "'"+in.name+"'")
		}
		for _, sp := range m.inputs {
			if !seen[sp.Name] {
				missing = append(missing, "'"+sp.Name+"'")
			}
		}
		return nil, prefix + "expected " + strconv.Itoa(len(m.inputs)) + " inputs but got " + strconv.Itoa(len(ins)) +
			" inputs for model '" + m.name + "'. Got input(s) [" + strings.Join(got, ",") +
			"], but missing required input(s) [" + strings.Join(missing, ",") + "]. Please provide all required input(s)."
	}
	unexpected := func(name string) string {
		return "unexpected inference input '" + name + "' for model '" + m.name + "'"
	}
	if m.maxBatch > 0 {
		batch := int64(-1)
		for _, in := range ins {
			if i, _ := m.input(in.name); i < 0 {
				return nil, unexpected(in.name)
			}
			if len(in.shape) == 0 {
				return nil, prefix + "input '" + in.name + "' has no shape but model requires batch dimension for '" + m.name + "'"
			}
			if batch < 0 {
				batch = in.shape[0]
			} else if in.shape[0] != batch {
				return nil, prefix + "input '" + in.name + "' batch size does not match other inputs for '" + m.name + "'"
			}
		}
		if batch > m.maxBatch {
			return nil, prefix + "inference request batch-size must be <= " + strconv.FormatInt(m.maxBatch, 10) + " for '" + m.name + "'"
		}
	}
	order := make([]int, len(m.inputs))
	for ri, in := range ins {
		mi, sp := m.input(in.name)
		if mi < 0 {
			return nil, unexpected(in.name)
		}
		order[mi] = ri
		if in.dtype != sp.DataType {
			return nil, prefix + "inference input '" + in.name + "' data-type is '" + in.datatype +
				"', but model '" + m.name + "' expects '" + sp.DataType.String() + "'"
		}
		dims := in.shape
		if m.maxBatch > 0 {
			dims = dims[1:]
		}
		if !shapeMatches(sp.Shape, dims) {
			msg := prefix + "unexpected shape for input '" + in.name + "' for model '" + m.name + "'. Expected " +
				dimsString(m.metaShape(sp.Shape)) + ", got " + dimsString(in.shape) + ". "
			if !note {
				return nil, strings.TrimSuffix(msg, " ")
			}
			if m.maxBatch > 0 {
				msg += "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be " +
					"prepended to each input shape. If you want to specify the full shape including the batch dim in " +
					"your input dims config, try setting max_batch_size to zero. See the model configuration docs for " +
					"more info on max_batch_size."
			}
			return nil, msg // Triton keeps the trailing space when there is no note
		}
	}
	return order, ""
}

// shapeMatches compares request dims with config dims, -1 matching any.
func shapeMatches(config, dims []int64) bool {
	if len(config) != len(dims) {
		return false
	}
	for i, d := range config {
		if d != -1 && d != dims[i] {
			return false
		}
	}
	return true
}

// elementCount is Triton's GetElementCount: the product of the dims, 0 for
// an empty shape; ok is false for negative dims or overflow.
func elementCount(shape []int64) (n int64, ok bool) {
	if len(shape) == 0 {
		return 0, true
	}
	n = 1
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d != 0 && n > math.MaxInt64/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// splitStrings parses length-prefixed BYTES elements, checking them against
// want as Triton's core does; msg is the error text, or "" on success. It
// counts before it allocates, so a declared count cannot outgrow the bytes.
func splitStrings(raw []byte, want int64, what string) (strs [][]byte, msg string) {
	count := int64(0)
	for off := 0; off < len(raw); {
		rem := len(raw) - off
		if rem < 4 {
			return nil, "incomplete string length indicator for " + what + ", expecting 4 bytes but only " +
				strconv.Itoa(rem) + " bytes available. Please make sure the string length indicator is in one buffer."
		}
		l := int(binary.LittleEndian.Uint32(raw[off:]))
		off += 4
		if rem-4 < l {
			return nil, "incomplete string for " + what + ", expecting string of length " + strconv.Itoa(l) +
				" but only " + strconv.Itoa(rem-4) + " bytes available"
		}
		off += l
		count++
	}
	if count < want {
		return nil, "expected " + strconv.FormatInt(want, 10) + " string elements for " + what + ", got " + strconv.FormatInt(count, 10)
	}
	if count > want {
		return nil, "unexpected number of string elements " + strconv.FormatInt(count, 10) + " for " + what +
			", expecting " + strconv.FormatInt(want, 10)
	}
	strs = make([][]byte, 0, count)
	for off := 0; off < len(raw); {
		l := int(binary.LittleEndian.Uint32(raw[off:]))
		strs = append(strs, raw[off+4:off+4+l:off+4+l])
		off += 4 + l
	}
	return strs, ""
}

// serializeStrings is the binary form of BYTES elements.
func serializeStrings(dst []byte, strs [][]byte) []byte {
	for _, s := range strs {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)))
		dst = append(dst, s...)
	}
	return dst
}

// binaryBytes is a tensor's binary-extension form.
func binaryBytes(t *tensor.Tensor) []byte {
	if t.DataType == tensor.Bytes {
		return serializeStrings(nil, t.Strings)
	}
	return t.Data
}

// ihclKey finds the Inference-Header-Content-Length key of a reply header,
// whatever its case.
func ihclKey(h http.Header) (string, bool) {
	for k := range h {
		if strings.EqualFold(k, "Inference-Header-Content-Length") {
			return k, true
		}
	}
	return "", false
}

// mangle breaks a good answer of model "garbage" as HeaderGarbage asks.
func (s *Server) mangle(r *http.Request, rep *reply) (*reply, *httpError) {
	key, hasIHCL := ihclKey(rep.header)
	switch mode := r.Header.Get(HeaderGarbage); mode {
	case "", "truncated":
		// Cut the body short: inside the binary blocks when there are any
		// (the JSON header then promises bytes that never come), else
		// inside the JSON.
		cut := len(rep.body) / 2
		if hasIHCL && len(rep.header[key]) > 0 {
			if n, err := strconv.Atoi(rep.header[key][0]); err == nil && n < len(rep.body) {
				cut = n + (len(rep.body)-n)/2
			}
		}
		rep.body = rep.body[:cut]
	case "ihcl":
		// Claim a JSON header longer than the whole body.
		if !hasIHCL {
			key = "Inference-Header-Content-Length"
		}
		rep.header[key] = []string{strconv.Itoa(len(rep.body) + 100)}
	case "json":
		rep.body = []byte(`{"model_name":"garbage","outputs":[{"name":`)
		delete(rep.header, key)
		rep.header["Content-Type"] = []string{"application/json"}
	case "empty":
		rep.body = nil
		delete(rep.header, key)
		rep.header["Content-Type"] = []string{"application/json"}
	default:
		return nil, errorJSON(http.StatusBadRequest, "mock: "+HeaderGarbage+" must be truncated, ihcl, json or empty, got "+strconv.Quote(mode))
	}
	return rep, nil
}
