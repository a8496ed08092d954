package oip

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/test/conformance"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// refInput is what the reference reader below recovers from a request.
type refInput struct {
	Name     string
	DataType string
	Shape    []int64
	Raw      []byte   // fixed-size block
	Strings  []string // BYTES elements
}

// refReadBinary is an independent reader of binary-extension request
// bodies, written from docs/open-inference-protocol.md §5.1 rather than from the encoder: JSON
// header via encoding/json, then blocks in input order.
func refReadBinary(t *testing.T, body []byte, headerLength int) (id string, ins []refInput) {
	t.Helper()
	if headerLength <= 0 || headerLength > len(body) {
		t.Fatalf("header length %d for a %d-byte body", headerLength, len(body))
	}
	var hdr struct {
		ID     *string `json:"id"`
		Inputs []struct {
			Name       string          `json:"name"`
			Shape      []int64         `json:"shape"`
			Datatype   string          `json:"datatype"`
			Data       json.RawMessage `json:"data"`
			Parameters struct {
				BinaryDataSize *int `json:"binary_data_size"`
			} `json:"parameters"`
		} `json:"inputs"`
		Outputs    json.RawMessage `json:"outputs"`
		Parameters map[string]any  `json:"parameters"`
	}
	dec := json.NewDecoder(bytes.NewReader(body[:headerLength]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&hdr); err != nil {
		t.Fatalf("header %q: %v", body[:headerLength], err)
	}
	if hdr.Outputs != nil {
		t.Errorf("header lists outputs %s; binary_data_output only covers unlisted outputs", hdr.Outputs)
	}
	if v, ok := hdr.Parameters["binary_data_output"].(bool); !ok || !v {
		t.Errorf("header parameters %v lack binary_data_output: true", hdr.Parameters)
	}
	if hdr.ID != nil {
		id = *hdr.ID
	}
	bin := body[headerLength:]
	for _, in := range hdr.Inputs {
		if in.Data != nil {
			t.Errorf("input %s has JSON data next to binary", in.Name)
		}
		if in.Parameters.BinaryDataSize == nil {
			t.Fatalf("input %s has no binary_data_size", in.Name)
		}
		size := *in.Parameters.BinaryDataSize
		if size > len(bin) {
			t.Fatalf("input %s: %d bytes announced, %d left", in.Name, size, len(bin))
		}
		block := bin[:size]
		bin = bin[size:]
		r := refInput{Name: in.Name, DataType: in.Datatype, Shape: in.Shape}
		if in.Datatype == "BYTES" {
			r.Strings = []string{}
			for len(block) > 0 {
				n := int(binary.LittleEndian.Uint32(block))
				r.Strings = append(r.Strings, string(block[4:4+n]))
				block = block[4+n:]
			}
		} else {
			r.Raw = append([]byte{}, block...)
		}
		ins = append(ins, r)
	}
	if len(bin) != 0 {
		t.Errorf("%d bytes left after the last block", len(bin))
	}
	return id, ins
}

func TestEncodeBinaryExact(t *testing.T) {
	inputs := []tensor.Tensor{
		fp32T("x", []int64{2}, 1, -2),
		bytesT("s\"q", []int64{2}, "ab", ""),
		int32T("scalar", nil, 7),
		boolT("b", []int64{1, 2}, true, false),
	}
	for _, kind := range []ServerKind{Triton, KServe} {
		body, hl, ct, err := EncodeRequest(nil, inputs, EncodeOptions{Kind: kind, ID: "r-1"})
		if err != nil {
			t.Fatal(err)
		}
		wantHdr := `{"id":"r-1","inputs":[` +
			`{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}},` +
			`{"name":"s\"q","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":10}},` +
			`{"name":"scalar","shape":[1],"datatype":"INT32","parameters":{"binary_data_size":4}},` +
			`{"name":"b","shape":[1,2],"datatype":"BOOL","parameters":{"binary_data_size":2}}` +
			`],"parameters":{"binary_data_output":true}}`
		wantBin := "0000803f000000c0" + "020000006162" + "00000000" + "07000000" + "0100"
		if got := string(body[:hl]); got != wantHdr {
			t.Errorf("%v header\n got %s\nwant %s", kind, got, wantHdr)
		}
		if got := hex.EncodeToString(body[hl:]); got != wantBin {
			t.Errorf("%v blocks\n got %s\nwant %s", kind, got, wantBin)
		}
		if ct != "application/octet-stream" {
			t.Errorf("%v content type %q", kind, ct)
		}
		if cap(body) != len(body) {
			t.Errorf("%v body cap %d, len %d: want one exact allocation", kind, cap(body), len(body))
		}
	}
}

func TestEncodeBinaryRoundTrip(t *testing.T) {
	cases := []struct {
		name   string
		inputs []tensor.Tensor
	}{
		{"empty", nil},
		{"fp32 batch", []tensor.Tensor{fp32T("in", []int64{2, 3}, 1, 2, 3, 4, 5, float32(math.NaN()))}},
		{"all widths", []tensor.Tensor{
			fp16T("h", []int64{2}, 1, -0.5), fp64T("d", []int64{1}, math.Pi),
			int64T("i64", []int64{2}, math.MinInt64, math.MaxInt64), uint64T("u64", []int64{1}, math.MaxUint64),
			boolT("b", []int64{3}, true, false, true),
		}},
		{"bytes", []tensor.Tensor{bytesT("text", []int64{3}, "héllo", "", "a\x00b")}},
		{"zero elements", []tensor.Tensor{fp32T("none", []int64{0, 4}), bytesT("nos", []int64{0})}},
		{"unicode name", []tensor.Tensor{fp32T("名前\n", []int64{1}, 1)}},
	}
	for _, tc := range cases {
		for _, kind := range []ServerKind{Triton, KServe} {
			t.Run(tc.name+"/"+kind.String(), func(t *testing.T) {
				body, hl, _, err := EncodeRequest(nil, tc.inputs, EncodeOptions{Kind: kind, ID: "id\u2028"})
				if err != nil {
					t.Fatal(err)
				}
				id, got := refReadBinary(t, body, hl)
				if id != "id\u2028" {
					t.Errorf("id %q", id)
				}
				if len(got) != len(tc.inputs) {
					t.Fatalf("%d inputs back, want %d", len(got), len(tc.inputs))
				}
				for i, in := range tc.inputs {
					g := got[i]
					if g.Name != in.Name || g.DataType != in.DataType.String() || !reflect.DeepEqual(g.Shape, in.Shape) {
						t.Errorf("input %d: got %s %s %v, want %s %v %v", i, g.Name, g.DataType, g.Shape, in.Name, in.DataType, in.Shape)
					}
					if in.DataType == tensor.Bytes {
						want := []string{}
						for _, s := range in.Strings {
							want = append(want, string(s))
						}
						if !reflect.DeepEqual(g.Strings, want) {
							t.Errorf("input %d strings %q, want %q", i, g.Strings, want)
						}
					} else if !bytes.Equal(g.Raw, in.Data) {
						t.Errorf("input %d data %x, want %x", i, g.Raw, in.Data)
					}
				}
			})
		}
	}
}

// TestEncodeBF16Conformance checks tritonclient's BF16 wire format
// (vector tritonclient-bf16-serialization): the high half of the float32,
// truncated, and the decoder reading it back.
func TestEncodeBF16Conformance(t *testing.T) {
	ran := false
	for _, c := range conformance.MustLoad(t, "oip_cases.json") {
		if c.ID != "tritonclient-bf16-serialization" {
			continue
		}
		ran = true
		var in struct {
			Values []float32 `json:"values_fp32"`
		}
		var want struct {
			Hex     string    `json:"bf16_hex"`
			Decoded []float32 `json:"decoded_back"`
		}
		conformance.Decode(t, c.Input, &in)
		conformance.Decode(t, c.Expected, &want)
		bf := bf16T("x", []int64{int64(len(in.Values))}, in.Values...)
		body, hl, _, err := EncodeRequest(nil, []tensor.Tensor{bf}, EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(body[hl:]); got != want.Hex {
			t.Errorf("bf16 block %s, want %s", got, want.Hex)
		}
		resp := `{"outputs":[{"name":"y","datatype":"BF16","shape":[` + strconv.Itoa(len(in.Values)) +
			`],"parameters":{"binary_data_size":` + strconv.Itoa(len(body)-hl) + `}}]}`
		outs, err := DecodeResponse(append([]byte(resp), body[hl:]...), len(resp), nil, tensor.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range want.Decoded {
			if got := float32(outs[0].Float64At(i)); got != w {
				t.Errorf("decoded[%d] = %v, want %v", i, got, w)
			}
		}
	}
	if !ran {
		t.Fatal("vector tritonclient-bf16-serialization not found")
	}
}

func TestEncodeMLServerExact(t *testing.T) {
	inputs := []tensor.Tensor{
		fp32T("f", []int64{6}, 1, 0.1, -2.5e-7, 1e6, float32(math.NaN()), float32(math.Copysign(0, -1))),
		fp16T("h", []int64{2}, 0.1, 65504),
		fp64T("d", []int64{1}, 0.1),
		int64T("i", []int64{2}, math.MinInt64, 9007199254740993),
		uint64T("u", []int64{1}, math.MaxUint64),
		boolT("b", []int64{2}, true, false),
		bytesT("s", []int64{2}, "a\"b\n", "ü"),
		bytesT("raw", []int64{2}, "\xff\x00", ""),
		int32T("scalar", nil, -3),
	}
	body, hl, ct, err := EncodeRequest([]byte("prefix"), inputs, EncodeOptions{Kind: MLServer, ID: "7"})
	if err != nil {
		t.Fatal(err)
	}
	want := `prefix{"id":"7","inputs":[` +
		`{"name":"f","shape":[6],"datatype":"FP32","data":[1.0,0.1,-2.5e-07,1e+06,null,-0.0]},` +
		`{"name":"h","shape":[2],"datatype":"FP16","data":[0.099975586,65504.0]},` +
		`{"name":"d","shape":[1],"datatype":"FP64","data":[0.1]},` +
		`{"name":"i","shape":[2],"datatype":"INT64","data":[-9223372036854775808,9007199254740993]},` +
		`{"name":"u","shape":[1],"datatype":"UINT64","data":[18446744073709551615]},` +
		`{"name":"b","shape":[2],"datatype":"BOOL","data":[true,false]},` +
		`{"name":"s","shape":[2],"datatype":"BYTES","data":["a\"b\n","ü"]},` +
		`{"name":"raw","shape":[2],"datatype":"BYTES","parameters":{"content_type":"base64"},"data":["/wA=",""]},` +
		`{"name":"scalar","shape":[],"datatype":"INT32","data":[-3]}]}`
	if string(body) != want {
		t.Errorf("body\n got %s\nwant %s", body, want)
	}
	if hl != -1 || ct != "application/json" {
		t.Errorf("header length %d, content type %q; want -1, application/json", hl, ct)
	}
	// The body must be strict JSON (MLServer parses with orjson).
	var v any
	if err := json.Unmarshal(body[len("prefix"):], &v); err != nil {
		t.Errorf("not strict JSON: %v", err)
	}
}

// TestEncodeMLServerRoundTrip reads MLServer bodies back with
// encoding/json and checks every value survives at its precision.
func TestEncodeMLServerRoundTrip(t *testing.T) {
	f32s := []float32{0, float32(math.Copysign(0, -1)), 1.0 / 3, math.MaxFloat32, math.SmallestNonzeroFloat32, 16777217, 3.4028e38, -1e-30}
	f64s := []float64{1.0 / 3, math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1 + 0.2}
	i64s := []int64{math.MinInt64, math.MaxInt64, 1 << 53, 1<<53 + 1}
	strs := []string{"plain", "tab\tquote\"backslash\\", "\x01\x1f", "日本"}
	inputs := []tensor.Tensor{
		fp32T("f32", []int64{int64(len(f32s))}, f32s...),
		fp64T("f64", []int64{int64(len(f64s))}, f64s...),
		int64T("i64", []int64{int64(len(i64s))}, i64s...),
		bytesT("str", []int64{int64(len(strs))}, strs...),
		bytesT("bin", []int64{2}, "\xc3\x28", "ok"),
	}
	body, _, _, err := EncodeRequest(nil, inputs, EncodeOptions{Kind: MLServer})
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Inputs []struct {
			Name       string            `json:"name"`
			Data       []json.RawMessage `json:"data"`
			Parameters map[string]string `json:"parameters"`
		} `json:"inputs"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	in := req.Inputs
	for i, w := range f32s {
		g, err := strconv.ParseFloat(string(in[0].Data[i]), 32)
		if err != nil || float32(g) != w || math.Signbit(g) != math.Signbit(float64(w)) {
			t.Errorf("f32[%d] = %s, want %v", i, in[0].Data[i], w)
		}
	}
	for i, w := range f64s {
		if g, err := strconv.ParseFloat(string(in[1].Data[i]), 64); err != nil || g != w {
			t.Errorf("f64[%d] = %s, want %v", i, in[1].Data[i], w)
		}
	}
	for i, w := range i64s {
		if g, err := strconv.ParseInt(string(in[2].Data[i]), 10, 64); err != nil || g != w {
			t.Errorf("i64[%d] = %s, want %d", i, in[2].Data[i], w)
		}
	}
	for i, w := range strs {
		var g string
		if err := json.Unmarshal(in[3].Data[i], &g); err != nil || g != w {
			t.Errorf("str[%d] = %s, want %q", i, in[3].Data[i], w)
		}
	}
	if in[3].Parameters != nil {
		t.Errorf("UTF-8 strings got parameters %v", in[3].Parameters)
	}
	if in[4].Parameters["content_type"] != "base64" {
		t.Errorf("non-UTF-8 strings: parameters %v, want content_type base64", in[4].Parameters)
	}
	for i, w := range []string{"\xc3\x28", "ok"} {
		var s string
		_ = json.Unmarshal(in[4].Data[i], &s)
		if g, err := base64.StdEncoding.DecodeString(s); err != nil || string(g) != w {
			t.Errorf("bin[%d] = %s, want base64 of %q", i, in[4].Data[i], w)
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	cases := []struct {
		name   string
		kind   ServerKind
		inputs []tensor.Tensor
		code   apierr.Code
		msg    string // substring of the message
	}{
		{"kserve bf16", KServe, []tensor.Tensor{bf16T("x", []int64{1}, 1)}, apierr.InvalidArgument,
			"input 'x' has datatype BF16, which the KServe server does not support"},
		{"mlserver bf16", MLServer, []tensor.Tensor{bf16T("x", []int64{1}, 1)}, apierr.InvalidArgument,
			"input 'x' has datatype BF16, which the MLServer server does not support"},
		{"kserve non-utf8", KServe, []tensor.Tensor{bytesT("s", []int64{2}, "ok", "\xff")}, apierr.InvalidArgument,
			"input 's' holds a string that is not valid UTF-8"},
		{"mlserver +inf", MLServer, []tensor.Tensor{fp32T("f", []int64{2}, 1, float32(math.Inf(1)))}, apierr.InvalidArgument,
			"input 'f' holds an infinite value"},
		{"mlserver -inf fp64", MLServer, []tensor.Tensor{fp64T("d", []int64{1}, math.Inf(-1))}, apierr.InvalidArgument,
			"input 'd' holds an infinite value"},
		{"mlserver inf fp16", MLServer, []tensor.Tensor{fp16T("h", []int64{1}, float32(math.Inf(1)))}, apierr.InvalidArgument,
			"input 'h' holds an infinite value"},
		{"short data", Triton, []tensor.Tensor{{Name: "x", DataType: tensor.FP32, Shape: []int64{2}, Data: make([]byte, 4)}}, apierr.Internal,
			"malformed tensor for input 'x'"},
		{"short data json", MLServer, []tensor.Tensor{{Name: "x", DataType: tensor.FP32, Shape: []int64{2}, Data: make([]byte, 4)}}, apierr.Internal,
			"malformed tensor for input 'x'"},
		{"invalid dtype", KServe, []tensor.Tensor{{Name: "x", Shape: []int64{1}}}, apierr.Internal, "malformed tensor"},
		{"unknown kind", ServerKind(9), nil, apierr.Internal, "unknown server kind"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, _, _, err := EncodeRequest([]byte("keep"), tc.inputs, EncodeOptions{Kind: tc.kind})
			e := wantAPIErr(t, err, tc.code)
			if !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("message %q lacks %q", e.Msg, tc.msg)
			}
			if string(body) != "keep" {
				t.Errorf("dst changed to %q on error", body)
			}
		})
	}
	// Triton takes what KServe and MLServer refuse.
	for _, in := range []tensor.Tensor{bf16T("x", []int64{1}, 1), bytesT("s", []int64{1}, "\xff")} {
		if _, _, _, err := EncodeRequest(nil, []tensor.Tensor{in}, EncodeOptions{Kind: Triton}); err != nil {
			t.Errorf("Triton refused %v: %v", in.DataType, err)
		}
	}
}

// TestEncodeAllocs pins the allocation contract of the hot path: one
// allocation of exactly the body's size, none when dst has room.
func TestEncodeAllocs(t *testing.T) {
	inputs := []tensor.Tensor{
		fp32T("input_1", []int64{8, 224}, make([]float32, 8*224)...),
		bytesT("text", []int64{3}, "a", "bb", "ccc"),
	}
	opt := EncodeOptions{Kind: Triton, ID: "abc"}
	body, _, _, _ := EncodeRequest(nil, inputs, opt) // warm the pool
	if a := testing.AllocsPerRun(100, func() { _, _, _, _ = EncodeRequest(nil, inputs, opt) }); a != 1 {
		t.Errorf("%v allocations with nil dst, want 1", a)
	}
	dst := make([]byte, 0, len(body)+10)
	if a := testing.AllocsPerRun(100, func() { _, _, _, _ = EncodeRequest(dst, inputs, opt) }); a != 0 {
		t.Errorf("%v allocations with room in dst, want 0", a)
	}
	got, _, _, _ := EncodeRequest(dst, inputs, opt)
	if &got[0] != &dst[:1][0] || !bytes.Equal(got, body) {
		t.Error("dst with room was not used in place")
	}
	mlOpt := EncodeOptions{Kind: MLServer}
	_, _, _, _ = EncodeRequest(nil, inputs, mlOpt)
	if a := testing.AllocsPerRun(100, func() { _, _, _, _ = EncodeRequest(nil, inputs, mlOpt) }); a != 1 {
		t.Errorf("MLServer: %v allocations, want 1", a)
	}
}
