package mockv2

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/x448/float16"
)

// client talks to the mock without transparent gzip, so tests see the
// bytes the server wrote.
var client = &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: 20 * time.Second}

// startServer serves a mock of kind on a real socket for the test.
func startServer(t testing.TB, opt Options) string {
	t.Helper()
	s, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// call sends one request; hdr holds header name/value pairs.
func call(t testing.TB, method, url string, body []byte, hdr ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// binaryBody appends blobs to a JSON header, returning the body and the
// Inference-Header-Content-Length value.
func binaryBody(header string, blobs ...[]byte) ([]byte, string) {
	b := []byte(header)
	for _, blob := range blobs {
		b = append(b, blob...)
	}
	return b, strconv.Itoa(len(header))
}

func f32le(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func f16le(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint16(b, float16.Fromfloat32(v).Bits())
	}
	return b
}

func i32le(vs ...int32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

func i64le(vs ...int64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func f64le(vs ...float64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

func strsLE(vs ...string) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

// v2Output is one decoded response output: its values rendered as
// canonical strings (floats via their float64 value, BYTES quoted).
type v2Output struct {
	Name     string
	Datatype string
	Shape    []int64
	Params   map[string]any
	Values   []string
	Binary   bool
}

// decodeV2 splits and decodes a v2 infer response the way any client must:
// the JSON header is IHCL bytes long when that header is present, binary
// outputs are taken in order by binary_data_size, and the bytes must add
// up exactly.
func decodeV2(t testing.TB, r response) (map[string]any, []v2Output) {
	t.Helper()
	jsonPart, rest := r.body, []byte(nil)
	if v := r.header.Get("Inference-Header-Content-Length"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n > len(r.body) {
			t.Fatalf("bad IHCL %q for a %d-byte body", v, len(r.body))
		}
		jsonPart, rest = r.body[:n], r.body[n:]
	}
	dec := json.NewDecoder(bytes.NewReader(jsonPart))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("response JSON: %v\n%s", err, jsonPart)
	}
	var outs []v2Output
	for _, raw := range doc["outputs"].([]any) {
		o := raw.(map[string]any)
		out := v2Output{Name: o["name"].(string), Datatype: o["datatype"].(string)}
		for _, d := range o["shape"].([]any) {
			n, _ := d.(json.Number).Int64()
			out.Shape = append(out.Shape, n)
		}
		out.Params, _ = o["parameters"].(map[string]any)
		if size, ok := out.Params["binary_data_size"]; ok {
			n, _ := size.(json.Number).Int64()
			if int(n) > len(rest) {
				t.Fatalf("output %s: binary_data_size %d but %d bytes left", out.Name, n, len(rest))
			}
			out.Values = binaryValues(t, out.Datatype, rest[:n])
			out.Binary = true
			rest = rest[n:]
		} else {
			b64 := out.Params["content_type"] == "base64"
			for _, v := range flatten(o["data"]) {
				out.Values = append(out.Values, jsonValue(t, out.Datatype, v, b64))
			}
		}
		outs = append(outs, out)
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left after the binary outputs", len(rest))
	}
	return doc, outs
}

func flatten(v any) []any {
	list, ok := v.([]any)
	if !ok {
		return []any{v}
	}
	var out []any
	for _, e := range list {
		out = append(out, flatten(e)...)
	}
	return out
}

func isFloatType(dt string) bool { return dt == "FP16" || dt == "FP32" || dt == "FP64" || dt == "BF16" }

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func jsonValue(t testing.TB, dt string, v any, b64 bool) string {
	switch x := v.(type) {
	case nil:
		return "NaN" // KServe and MLServer write NaN as null
	case bool:
		return strconv.FormatBool(x)
	case string:
		if b64 {
			d, err := base64.StdEncoding.DecodeString(x)
			if err != nil {
				t.Fatalf("base64 %q: %v", x, err)
			}
			return strconv.Quote(string(d))
		}
		return strconv.Quote(x)
	case json.Number:
		if isFloatType(dt) {
			f, err := x.Float64()
			if err != nil {
				t.Fatalf("float %q: %v", x, err)
			}
			return fmtFloat(f)
		}
		return x.String()
	}
	t.Fatalf("unexpected JSON value %#v", v)
	return ""
}

func binaryValues(t testing.TB, dt string, b []byte) []string {
	var out []string
	switch dt {
	case "BYTES":
		for len(b) > 0 {
			if len(b) < 4 {
				t.Fatalf("truncated BYTES length")
			}
			n := int(binary.LittleEndian.Uint32(b))
			if len(b)-4 < n {
				t.Fatalf("truncated BYTES element")
			}
			out = append(out, strconv.Quote(string(b[4:4+n])))
			b = b[4+n:]
		}
		return out
	case "BOOL":
		for _, c := range b {
			out = append(out, strconv.FormatBool(c != 0))
		}
		return out
	}
	size := map[string]int{"INT8": 1, "UINT8": 1, "INT16": 2, "UINT16": 2, "FP16": 2, "INT32": 4, "UINT32": 4,
		"FP32": 4, "INT64": 8, "UINT64": 8, "FP64": 8}[dt]
	if size == 0 || len(b)%size != 0 {
		t.Fatalf("%d bytes of %s", len(b), dt)
	}
	for i := 0; i < len(b); i += size {
		e := b[i : i+size]
		switch dt {
		case "INT8":
			out = append(out, strconv.Itoa(int(int8(e[0]))))
		case "UINT8":
			out = append(out, strconv.Itoa(int(e[0])))
		case "INT16":
			out = append(out, strconv.Itoa(int(int16(binary.LittleEndian.Uint16(e)))))
		case "UINT16":
			out = append(out, strconv.Itoa(int(binary.LittleEndian.Uint16(e))))
		case "INT32":
			out = append(out, strconv.Itoa(int(int32(binary.LittleEndian.Uint32(e)))))
		case "UINT32":
			out = append(out, strconv.FormatUint(uint64(binary.LittleEndian.Uint32(e)), 10))
		case "INT64":
			out = append(out, strconv.FormatInt(int64(binary.LittleEndian.Uint64(e)), 10))
		case "UINT64":
			out = append(out, strconv.FormatUint(binary.LittleEndian.Uint64(e), 10))
		case "FP16":
			out = append(out, fmtFloat(float64(float16.Frombits(binary.LittleEndian.Uint16(e)).Float32())))
		case "FP32":
			out = append(out, fmtFloat(float64(math.Float32frombits(binary.LittleEndian.Uint32(e)))))
		case "FP64":
			out = append(out, fmtFloat(math.Float64frombits(binary.LittleEndian.Uint64(e))))
		}
	}
	return out
}

// Expected-value builders in the canonical form of v2Output.Values.
func fl(vs ...float64) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmtFloat(v)
	}
	return out
}

func f32s(vs ...float32) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmtFloat(float64(v))
	}
	return out
}

func ints(vs ...int64) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.FormatInt(v, 10)
	}
	return out
}

func quoted(vs ...string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.Quote(v)
	}
	return out
}

func bools(vs ...bool) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.FormatBool(v)
	}
	return out
}

// errorText decodes {"error": "..."}.
func errorText(t testing.TB, r response) string {
	t.Helper()
	var e struct {
		Error *string `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error == nil {
		t.Fatalf("want an {\"error\"} body, got %d %q", r.status, r.body)
	}
	return *e.Error
}

func jsonList(vs ...any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// newTrackedServer serves h; it closes started when its one request's
// handler begins and done when it has returned.
func newTrackedServer(t testing.TB, h http.Handler, started, done chan struct{}) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		defer close(done)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
