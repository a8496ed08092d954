package oip

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// got is a tensor's shape and values in comparable form: numbers as
// float64 (exact for the values used here), 64-bit integers as int64
// (exact always), strings as strings.
type got struct {
	Name  string
	Type  tensor.DataType
	Shape []int64
	F     []float64
	I     []int64
	S     []string
}

func view(t tensor.Tensor) got {
	g := got{Name: t.Name, Type: t.DataType, Shape: t.Shape}
	n := t.Len()
	switch t.DataType {
	case tensor.Bytes:
		g.S = []string{}
		for _, s := range t.Strings {
			g.S = append(g.S, string(s))
		}
	case tensor.Int64, tensor.Uint64:
		for i := 0; i < n; i++ {
			g.I = append(g.I, t.Int64At(i))
		}
	default:
		for i := 0; i < n; i++ {
			g.F = append(g.F, t.Float64At(i))
		}
	}
	return g
}

// sameFloats compares float lists with NaN equal to NaN.
func sameFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			return false
		}
		if a[i] == 0 && math.Signbit(a[i]) != math.Signbit(b[i]) {
			return false
		}
	}
	return true
}

func sameView(a, b got) bool {
	return a.Name == b.Name && a.Type == b.Type && reflect.DeepEqual(a.Shape, b.Shape) &&
		sameFloats(a.F, b.F) && reflect.DeepEqual(a.I, b.I) && reflect.DeepEqual(a.S, b.S)
}

func jsonOnly(outputs string) []byte {
	return []byte(`{"model_name":"m","model_version":null,"id":"1","parameters":null,"outputs":[` + outputs + `]}`)
}

func TestDecodeJSONData(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name   string
		output string
		want   got
	}{
		{"flat fp32", `{"name":"y","datatype":"FP32","shape":[2,2],"data":[1,2.5,-0.0,6.800000190734863]}`,
			got{Name: "y", Type: tensor.FP32, Shape: []int64{2, 2}, F: []float64{1, 2.5, math.Copysign(0, -1), float64(float32(6.8))}}},
		{"nested fp32", `{"name":"y","datatype":"FP32","shape":[2,2],"data":[[1,2],[3,4]]}`,
			got{Name: "y", Type: tensor.FP32, Shape: []int64{2, 2}, F: []float64{1, 2, 3, 4}}},
		{"scalar data", `{"name":"y","datatype":"FP64","shape":[],"data":0.1}`,
			got{Name: "y", Type: tensor.FP64, Shape: []int64{}, F: []float64{0.1}}},
		{"triton nan tokens", `{"name":"y","datatype":"FP32","shape":[4],"data":[NaN,Infinity,-Infinity,1e39]}`,
			got{Name: "y", Type: tensor.FP32, Shape: []int64{4}, F: []float64{nan, inf, -inf, inf}}},
		{"null is NaN", `{"name":"y","datatype":"FP16","shape":[2],"parameters":null,"data":[null,0.5]}`,
			got{Name: "y", Type: tensor.FP16, Shape: []int64{2}, F: []float64{nan, 0.5}}},
		{"fp64 exact", `{"name":"y","datatype":"FP64","shape":[2],"data":[0.30000000000000004,5e-324]}`,
			got{Name: "y", Type: tensor.FP64, Shape: []int64{2}, F: []float64{0.30000000000000004, 5e-324}}},
		{"fp32 from big integer", `{"name":"y","datatype":"FP32","shape":[1],"data":[16777217]}`,
			got{Name: "y", Type: tensor.FP32, Shape: []int64{1}, F: []float64{16777216}}},
		{"int64 exact", `{"name":"y","datatype":"INT64","shape":[3],"data":[9223372036854775807,-9223372036854775808,9007199254740993]}`,
			got{Name: "y", Type: tensor.Int64, Shape: []int64{3}, I: []int64{math.MaxInt64, math.MinInt64, 9007199254740993}}},
		{"uint64 exact", `{"name":"y","datatype":"UINT64","shape":[1],"data":[18446744073709551615]}`,
			got{Name: "y", Type: tensor.Uint64, Shape: []int64{1}, I: []int64{-1}}},
		{"int8 range", `{"name":"y","datatype":"INT8","shape":[2],"data":[-128,127]}`,
			got{Name: "y", Type: tensor.Int8, Shape: []int64{2}, F: []float64{-128, 127}}},
		{"uint16 and integral double", `{"name":"y","datatype":"UINT16","shape":[2],"data":[65535,2.0]}`,
			got{Name: "y", Type: tensor.Uint16, Shape: []int64{2}, F: []float64{65535, 2}}},
		{"bool tokens and 0/1", `{"name":"y","datatype":"BOOL","shape":[4],"data":[true,false,1,0]}`,
			got{Name: "y", Type: tensor.Bool, Shape: []int64{4}, F: []float64{1, 0, 1, 0}}},
		{"bytes with escapes", `{"name":"y","datatype":"BYTES","shape":[3],"data":["plain","t\u00e9\n\"x\"",""]}`,
			got{Name: "y", Type: tensor.Bytes, Shape: []int64{3}, S: []string{"plain", "té\n\"x\"", ""}}},
		{"base64 bytes", `{"name":"y","datatype":"BYTES","shape":[2],"parameters":{"content_type":"base64"},"data":["/wA=","aGk="]}`,
			got{Name: "y", Type: tensor.Bytes, Shape: []int64{2}, S: []string{"\xff\x00", "hi"}}},
		{"fixed width split", `{"name":"y","datatype":"BYTES","shape":[3],"data":["ab\u0000cd\u0000ef\u0000"]}`,
			got{Name: "y", Type: tensor.Bytes, Shape: []int64{3}, S: []string{"ab", "cd", "ef"}}},
		{"empty tensor without data", `{"name":"y","datatype":"FP32","shape":[0,3]}`,
			got{Name: "y", Type: tensor.FP32, Shape: []int64{0, 3}}},
		{"empty tensor empty data", `{"name":"y","datatype":"BYTES","shape":[0],"data":[]}`,
			got{Name: "y", Type: tensor.Bytes, Shape: []int64{0}, S: []string{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			outs, err := DecodeResponse(jsonOnly(tc.output), -1, nil, tensor.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if len(outs) != 1 {
				t.Fatalf("%d outputs", len(outs))
			}
			if err := outs[0].Validate(); err != nil {
				t.Errorf("invalid tensor: %v", err)
			}
			if g := view(outs[0]); !sameView(g, tc.want) {
				t.Errorf("got  %+v\nwant %+v", g, tc.want)
			}
		})
	}
}

func TestDecodeBinary(t *testing.T) {
	hdr := `{"model_name":"m","outputs":[` +
		`{"name":"a","datatype":"INT32","shape":[2],"parameters":{"binary_data_size":8}},` +
		`{"name":"j","datatype":"INT32","shape":[1],"data":[5]},` +
		`{"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":11}},` +
		`{"name":"z","datatype":"FP32","shape":[0],"parameters":{"binary_data_size":0}},` +
		`{"name":"b","datatype":"BOOL","shape":[],"parameters":{"binary_data_size":1}}]}`
	bin := mustHex(t, "01000000feffffff"+"0300000061626300000000"+"01")
	body := append([]byte(hdr), bin...)
	outs, err := DecodeResponse(body, len(hdr), nil, tensor.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []got{
		{Name: "a", Type: tensor.Int32, Shape: []int64{2}, F: []float64{1, -2}},
		{Name: "j", Type: tensor.Int32, Shape: []int64{1}, F: []float64{5}},
		{Name: "s", Type: tensor.Bytes, Shape: []int64{2}, S: []string{"abc", ""}},
		{Name: "z", Type: tensor.FP32, Shape: []int64{0}},
		{Name: "b", Type: tensor.Bool, Shape: []int64{}, F: []float64{1}},
	}
	for i := range want {
		if g := view(outs[i]); !sameView(g, want[i]) {
			t.Errorf("output %d: got %+v\nwant %+v", i, g, want[i])
		}
	}
	// Zero copy: fixed data and strings alias the body, capped so an
	// append cannot overwrite the next block.
	if unsafe.SliceData(outs[0].Data) != &body[len(hdr)] || cap(outs[0].Data) != 8 {
		t.Error("fixed-size data does not alias the body")
	}
	if unsafe.SliceData(outs[2].Strings[0]) != &body[len(hdr)+12] || cap(outs[2].Strings[0]) != 3 {
		t.Error("BYTES element does not alias the body")
	}
}

func TestDecodeSignatureReshape(t *testing.T) {
	sig := &tensor.Signature{Outputs: []tensor.Spec{
		{Name: "vec", DataType: tensor.Int64, Shape: []int64{-1}},
		{Name: "fixed", DataType: tensor.FP32, Shape: []int64{3}},
		{Name: "other", DataType: tensor.FP32, Shape: []int64{2}},
		{Name: "mat", DataType: tensor.FP32, Shape: []int64{-1, 1}},
	}}
	body := jsonOnly(`{"name":"vec","datatype":"INT64","shape":[3,1],"data":[1,2,3]},` +
		`{"name":"fixed","datatype":"FP32","shape":[3,1],"data":[1,2,3]},` +
		`{"name":"other","datatype":"FP32","shape":[3,1],"data":[1,2,3]},` +
		`{"name":"mat","datatype":"FP32","shape":[3,1],"data":[1,2,3]},` +
		`{"name":"unknown","datatype":"FP32","shape":[3,1],"data":[1,2,3]}`)
	outs, err := DecodeResponse(body, -1, sig, tensor.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int64{{3}, {3}, {3, 1}, {3, 1}, {3, 1}}
	for i, w := range want {
		if !reflect.DeepEqual(outs[i].Shape, w) {
			t.Errorf("%s: shape %v, want %v", outs[i].Name, outs[i].Shape, w)
		}
	}
	if unsafe.StringData(outs[0].Name) != unsafe.StringData(sig.Outputs[0].Name) {
		t.Error("a name the signature knows was allocated again")
	}
}

func TestDecodeErrors(t *testing.T) {
	lim := tensor.Limits{MaxElements: 1000}
	cases := []struct {
		name string
		body string
		hl   int // -1: JSON only; else the header is body[:hl]
		msg  string
	}{
		{"empty", ``, -1, "empty body"},
		{"not json", `<html>`, -1, "malformed JSON"},
		{"array root", `[]`, -1, "not an object"},
		{"trailing garbage", `{"outputs":[]}x`, -1, "unexpected data after the JSON"},
		{"binary without header", `{"outputs":[]}` + "\x00\x01", -1, "unexpected data after the JSON"},
		{"no outputs", `{"model_name":"m"}`, -1, `no "outputs" list`},
		{"outputs not list", `{"outputs":{}}`, -1, `no "outputs" list`},
		{"output not object", `{"outputs":[1]}`, -1, "output 0 is not an object with a name, datatype and shape"},
		{"output too small", `{"outputs":[{"name":"y","datatype":"FP32","shape":[0]},{}]}`, -1, "output 1 is not an object"},
		{"no name", `{"outputs":[{"datatype":"FP32","shape":[1],"data":[1]}]}`, -1, "output 0 has no name"},
		{"no datatype", `{"outputs":[{"name":"y","shape":[1],"data":[1]}]}`, -1, "output 'y' has no datatype"},
		{"bad datatype", `{"outputs":[{"name":"y","datatype":"STRING","shape":[1],"data":["a"]}]}`, -1, "unknown datatype 'STRING'"},
		{"no shape", `{"outputs":[{"name":"y","datatype":"FP32","data":[1]}]}`, -1, "output 'y' has no shape"},
		{"negative dim", `{"outputs":[{"name":"y","datatype":"FP32","shape":[-1],"data":[1]}]}`, -1, "invalid dimension -1"},
		{"fraction dim", `{"outputs":[{"name":"y","datatype":"FP32","shape":[1.5],"data":[1]}]}`, -1, "invalid dimension 1.5"},
		{"over limit", `{"outputs":[{"name":"y","datatype":"FP32","shape":[1000000000],"data":[1]}]}`, -1, "more than the limit of 1000 elements"},
		{"over limit in total", `{"outputs":[{"name":"a","datatype":"BOOL","shape":[600],"parameters":{"binary_data_size":600}},{"name":"b","datatype":"BOOL","shape":[600]}]}` + strings.Repeat("\x00", 600),
			len(`{"outputs":[{"name":"a","datatype":"BOOL","shape":[600],"parameters":{"binary_data_size":600}},{"name":"b","datatype":"BOOL","shape":[600]}]}`), "more than the limit"},
		{"overflowing shape", `{"outputs":[{"name":"y","datatype":"FP32","shape":[4294967296,4294967296]}]}`, -1, "more than the limit"},
		{"too few values", `{"outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[1,2]}]}`, -1, "has 2 data elements, shape [3] needs 3"},
		{"too many values", `{"outputs":[{"name":"y","datatype":"INT32","shape":[1],"data":[1,2]}]}`, -1, "has 2 data elements"},
		{"no data", `{"outputs":[{"name":"y","datatype":"INT32","shape":[1]}]}`, -1, "neither data nor binary_data_size"},
		{"int out of range", `{"outputs":[{"name":"y","datatype":"INT8","shape":[1],"data":[128]}]}`, -1, "holds 128, not a valid INT8 value"},
		{"negative uint", `{"outputs":[{"name":"y","datatype":"UINT32","shape":[1],"data":[-1]}]}`, -1, "holds -1, not a valid UINT32"},
		{"fraction int", `{"outputs":[{"name":"y","datatype":"INT32","shape":[1],"data":[1.5]}]}`, -1, "holds 1.5"},
		{"int64 too big", `{"outputs":[{"name":"y","datatype":"INT64","shape":[1],"data":[9223372036854775808]}]}`, -1, "not a valid INT64"},
		{"null int", `{"outputs":[{"name":"y","datatype":"INT32","shape":[1],"data":[null]}]}`, -1, "holds null"},
		{"string float", `{"outputs":[{"name":"y","datatype":"FP32","shape":[1],"data":["1"]}]}`, -1, `holds "1"`},
		{"bool 2", `{"outputs":[{"name":"y","datatype":"BOOL","shape":[1],"data":[2]}]}`, -1, "not a valid BOOL"},
		{"number as bytes", `{"outputs":[{"name":"y","datatype":"BYTES","shape":[1],"data":[1]}]}`, -1, "not a BYTES string"},
		{"bad base64", `{"outputs":[{"name":"y","datatype":"BYTES","shape":[1],"parameters":{"content_type":"base64"},"data":["!!"]}]}`, -1, "invalid base64"},
		{"uneven concatenation", `{"outputs":[{"name":"y","datatype":"BYTES","shape":[2],"data":["abc"]}]}`, -1, "has 1 data elements, shape [2] needs 2"},
		{"empty concatenation", `{"outputs":[{"name":"y","datatype":"BYTES","shape":[2],"data":[""]}]}`, -1, "has 1 data elements, shape [2] needs 2"},
		{"strings for empty", `{"outputs":[{"name":"y","datatype":"BYTES","shape":[0],"data":["a"]}]}`, -1, "has 1 data elements"},
		{"parameters not object", `{"outputs":[{"name":"y","datatype":"FP32","shape":[1],"parameters":[],"data":[1]}]}`, -1, "parameters that are not an object"},
		{"negative size", `{"outputs":[{"name":"y","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":-4}}]}`, -1, "invalid binary_data_size -4"},
		{"duplicate names", `{"outputs":[{"name":"y","datatype":"FP32","shape":[0]},{"name":"y","datatype":"FP32","shape":[0]}]}`, -1, "output 'y' appears twice"},
		{"header length zero", `{"outputs":[]}`, 0, "JSON header length 0"},
		{"header length too big", `{"outputs":[]}`, 99, "JSON header length 99"},
		// Binary blocks: every size is checked against what arrived.
		{"block beyond body", `{"outputs":[{"name":"y","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]}` + "\x00\x00\x00\x00", len(`{"outputs":[{"name":"y","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]}`), "announces 8 bytes of binary data but only 4 remain"},
		{"huge shape small body", `{"outputs":[{"name":"y","datatype":"FP32","shape":[1000000000],"parameters":{"binary_data_size":4}}]}` + "1234", len(`{"outputs":[{"name":"y","datatype":"FP32","shape":[1000000000],"parameters":{"binary_data_size":4}}]}`), "more than the limit"},
		{"size mismatch", `{"outputs":[{"name":"y","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":4}}]}` + "1234", len(`{"outputs":[{"name":"y","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":4}}]}`), "has 4 bytes of binary data, shape [2] of FP32 needs 8"},
		{"leftover bytes", `{"outputs":[{"name":"y","datatype":"INT8","shape":[1],"parameters":{"binary_data_size":1}}]}` + "12", len(`{"outputs":[{"name":"y","datatype":"INT8","shape":[1],"parameters":{"binary_data_size":1}}]}`), "1 bytes of binary data follow the last output"},
		{"bytes count too big for block", `{"outputs":[{"name":"y","datatype":"BYTES","shape":[3],"parameters":{"binary_data_size":8}}]}` + "\x00\x00\x00\x00\x00\x00\x00\x00", len(`{"outputs":[{"name":"y","datatype":"BYTES","shape":[3],"parameters":{"binary_data_size":8}}]}`), "too few for 3 BYTES elements"},
		{"bytes length beyond block", `{"outputs":[{"name":"y","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]}` + "\xff\xff\xff\xffab", len(`{"outputs":[{"name":"y","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]}`), "element 0 announces 4294967295 bytes but only 2 remain"},
		{"bytes incomplete prefix", `{"outputs":[{"name":"y","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":8}}]}` + "\x01\x00\x00\x00a\x00\x00\x00", len(`{"outputs":[{"name":"y","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":8}}]}`), "element 1 has an incomplete length prefix"},
		{"bytes trailing", `{"outputs":[{"name":"y","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":8}}]}` + "\x01\x00\x00\x00abcd", len(`{"outputs":[{"name":"y","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":8}}]}`), "3 bytes of binary data follow its 1 BYTES elements"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.hl > 0 && tc.hl < len(tc.body) && tc.body[tc.hl-1] != '}' {
				t.Fatalf("test bug: header length %d does not end at the JSON (%q)", tc.hl, tc.body[:tc.hl])
			}
			_, err := DecodeResponse([]byte(tc.body), tc.hl, nil, lim)
			e := wantAPIErr(t, err, apierr.BadGateway)
			if !strings.HasPrefix(e.Msg, "invalid response from inference server: ") || !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("message %q lacks %q", e.Msg, tc.msg)
			}
		})
	}
}

// TestDecodeHugeShapeNoAlloc: a 40-odd-byte body claiming a billion
// elements fails before anything sized by the claim is allocated.
func TestDecodeHugeShapeNoAlloc(t *testing.T) {
	bodies := []string{
		`{"outputs":[{"name":"y","datatype":"FP64","shape":[1000000000],"data":[1]}]}`,
		`{"outputs":[{"name":"y","datatype":"BYTES","shape":[60000000],"data":["a"]}]}`,
		`{"outputs":[{"name":"y","datatype":"FP64","shape":[60000000],"data":[1]}]}`,
		`{"outputs":[{"name":"y","datatype":"BYTES","shape":[60000000],"data":[""]}]}`,
		`{"outputs":[{"name":"y","datatype":"BYTES","shape":[60000000],"parameters":{"binary_data_size":0}}]}`,
	}
	for _, b := range bodies {
		body := []byte(b)
		var err error
		allocs := testing.AllocsPerRun(10, func() { _, err = DecodeResponse(body, -1, nil, tensor.Limits{}) })
		if err == nil {
			t.Fatalf("%s: accepted", b)
		}
		var ms1, ms2 runtimeMem
		ms1.read()
		for i := 0; i < 10; i++ {
			_, _ = DecodeResponse(body, -1, nil, tensor.Limits{})
		}
		ms2.read()
		if per := (ms2.bytes - ms1.bytes) / 10; per > 4096 {
			t.Errorf("%s: %d bytes allocated per failed decode (%v allocs)", b, per, allocs)
		}
	}
}

// TestDecodeResponseHeader: the header alone gives the outputs, the blocks
// in body order, and says which errors no binary section could change.
func TestDecodeResponseHeader(t *testing.T) {
	out := func(name, dt, shape string, size int) string {
		return `{"name":"` + name + `","datatype":"` + dt + `","shape":` + shape +
			`,"parameters":{"binary_data_size":` + strconv.Itoa(size) + `}}`
	}
	hdr := func(outs ...string) []byte {
		return []byte(`{"outputs":[` + strings.Join(outs, ",") + `]}`)
	}
	h, _, err := DecodeResponseHeader(hdr(out("a", "FP32", "[2]", 8), `{"name":"j","datatype":"INT32","shape":[1],"data":[7]}`,
		out("e", "FP32", "[0]", 0), out("s", "BYTES", "[1]", 9)), nil, tensor.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Block{{0, 8}, {2, 0}, {3, 9}}; !reflect.DeepEqual(h.Blocks, want) {
		t.Errorf("blocks %v, want %v", h.Blocks, want)
	}
	if len(h.Outputs) != 4 || h.Outputs[0].Data != nil || h.Outputs[1].Int64At(0) != 7 || h.Outputs[3].Strings != nil {
		t.Errorf("outputs %+v", h.Outputs)
	}
	if err := FillBytes(&h.Outputs[3], []byte{5, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'}); err != nil || string(h.Outputs[3].Strings[0]) != "hello" {
		t.Errorf("FillBytes: %q, %v", h.Outputs[3].Strings, err)
	}
	for _, c := range []struct {
		name   string
		header []byte
		final  bool
	}{
		{"not JSON", []byte("{"), true},
		{"unknown datatype first", hdr(out("a", "FP33", "[1]", 4), out("b", "FP32", "[1]", 4)), true},
		{"after an empty block", hdr(out("a", "FP32", "[0]", 0), out("b", "FP33", "[1]", 4)), true},
		{"size mismatch of the first block", hdr(out("a", "FP32", "[2]", 4)), false},
		{"after a non-empty block", hdr(out("a", "FP32", "[1]", 4), out("b", "FP33", "[1]", 4)), false},
		{"duplicate names, no blocks", hdr(`{"name":"a","datatype":"INT32","shape":[1],"data":[1]}`, `{"name":"a","datatype":"INT32","shape":[1],"data":[1]}`), false},
	} {
		_, final, err := DecodeResponseHeader(c.header, nil, tensor.Limits{})
		if err == nil || final != c.final {
			t.Errorf("%s: final %v, error %v; want final %v", c.name, final, err, c.final)
		}
	}
}
