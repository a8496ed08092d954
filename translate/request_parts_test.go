package translate

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
)

// jsonList is "[v(0), v(1), …]" with n values.
func jsonList(n int, v func(i int) string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v(i))
	}
	b.WriteByte(']')
	return b.String()
}

// TestRequestStreamParts: a streamed body's Parts concatenate to the very
// bytes predict.Request sends for it, for every dtype, both formats,
// unbatched inputs and tensors spanning many data blocks, whatever the
// chunking; what one refuses (BF16 off Triton) the other refuses alike.
func TestRequestStreamParts(t *testing.T) {
	spec := func(name string, dt tensor.DataType, shape ...int64) tensor.Spec {
		return tensor.Spec{Name: name, DataType: dt, Shape: shape}
	}
	sig := func(batched bool, specs ...tensor.Spec) *tensor.Signature {
		return &tensor.Signature{Batched: batched, Inputs: specs}
	}
	small := func(i int) string { return strconv.Itoa(i%251 - 125) }
	frac := func(i int) string { return strconv.FormatFloat(float64(i)/7-300, 'g', -1, 64) }
	boolean := func(i int) string { return strconv.FormatBool(i%3 == 1) }
	// Over three blocks of FP32, INT8 and BOOL.
	bigF := 3*tfrequest.BlockSize/4 + 5
	bigB := 3*tfrequest.BlockSize + 7
	all := sig(true,
		spec("f32", tensor.FP32, -1, 2), spec("f64", tensor.FP64, -1, 2), spec("f16", tensor.FP16, -1, 2),
		spec("bf16", tensor.BF16, -1, 2), spec("i8", tensor.Int8, -1, 2), spec("i16", tensor.Int16, -1, 2),
		spec("i32", tensor.Int32, -1, 2), spec("i64", tensor.Int64, -1, 2), spec("u8", tensor.Uint8, -1, 2),
		spec("u16", tensor.Uint16, -1, 2), spec("u32", tensor.Uint32, -1, 2), spec("u64", tensor.Uint64, -1, 2),
		spec("b", tensor.Bool, -1, 2), spec("s", tensor.Bytes, -1, 2))
	noBF16 := sig(true, slices.Concat(all.Inputs[:3], all.Inputs[4:])...)
	instance := func(sg *tensor.Signature, k int) string {
		var b strings.Builder
		b.WriteByte('{')
		for i, in := range sg.Inputs {
			if i > 0 {
				b.WriteString(", ")
			}
			v := "[" + strconv.Itoa(k+1) + ", " + strconv.Itoa(2*k) + "]"
			switch in.DataType {
			case tensor.FP32, tensor.FP64, tensor.FP16, tensor.BF16:
				v = "[" + frac(k) + ", 0.5]"
			case tensor.Bool:
				v = "[true, false]"
			case tensor.Bytes:
				v = `["x` + strconv.Itoa(k) + `", {"b64": "aGk="}]`
			}
			b.WriteString(`"` + in.Name + `": ` + v)
		}
		b.WriteByte('}')
		return b.String()
	}
	rows := func(sg *tensor.Signature, n int) string {
		return `{"instances": ` + jsonList(n, func(k int) string { return instance(sg, k) }) + "}"
	}
	cases := []struct {
		name  string
		sig   *tensor.Signature
		body  string
		parts int // binary extension: header + data blocks + built blocks (0: not checked)
	}{
		{"row, every dtype", all, rows(all, 3), 0},
		{"row, every dtype but BF16", noBF16, rows(noBF16, 2), 0},
		{"columnar, every dtype", all, `{"inputs": {` + strings.Join([]string{
			`"f32": [[1.5, -2]]`, `"f64": [[0.1, 3]]`, `"f16": [[0.25, 1]]`, `"bf16": [[2, 4]]`, `"i8": [[-1, 2]]`,
			`"i16": [[300, -5]]`, `"i32": [[7, 8]]`, `"i64": [[12345678901, -1]]`, `"u8": [[255, 0]]`, `"u16": [[65535, 1]]`,
			`"u32": [[4294967295, 2]]`, `"u64": [[18446744073709551615, 3]]`, `"b": [[false, true]]`, `"s": [["a", {"b64": "/w=="}]]`,
		}, ", ") + "}}", 0},
		{"unbatched", sig(false, spec("x", tensor.FP32, 3), spec("s", tensor.Bytes)),
			`{"instances": [{"x": [1, 2, 3], "s": "only"}]}`, 0},
		{"row FP32 over blocks", sig(true, spec("x", tensor.FP32, -1, 5)),
			`{"instances": [` + jsonList(bigF/5, func(k int) string { return jsonList(5, func(i int) string { return frac(5*k + i) }) }) + "]}", 1 + 4},
		{"columnar INT8 over blocks", sig(true, spec("x", tensor.Int8, -1)), `{"inputs": ` + jsonList(bigB, small) + "}", 1 + 4},
		{"columnar BOOL over blocks, named", sig(true, spec("b", tensor.Bool, -1), spec("f", tensor.FP16, -1)),
			`{"inputs": {"f": ` + jsonList(bigF, small) + `, "b": ` + jsonList(bigB, boolean) + "}}", 1 + 1 + 2},
		{"unbatched BF16 over blocks", sig(false, spec("w", tensor.BF16, int64(bigF))),
			`{"instances": [` + jsonList(bigF, frac) + "]}", 1 + 2},
	}
	for _, c := range cases {
		resolve := func(string) (*tensor.Signature, error) { return c.sig, nil }
		for _, kind := range []oip.ServerKind{oip.Triton, oip.KServe, oip.MLServer} {
			opt := RequestOptions{Kind: kind, ID: "p"}
			want, wantEx, wantErr := predict.Request([]byte(c.body), resolve, opt)
			for _, size := range []int{7, 4093, 64 << 10} {
				if size == 7 && len(c.body) > 4096 {
					continue
				}
				got, gotEx, err := streamRequest(resolve, opt, []byte(c.body), size)
				if wantErr != nil {
					if err == nil || err.Error() != wantErr.Error() {
						t.Errorf("%s, %v: stream error %v, predict.Request's %v", c.name, kind, err, wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s, %v, %d-byte chunks: %v", c.name, kind, size, err)
				}
				body := bytes.Join(got.Chunks(), nil)
				if !bytes.Equal(body, want.Body) || got.Len() != len(want.Body) || got.HeaderLength != want.HeaderLength ||
					got.ContentType != want.ContentType || gotEx != wantEx {
					t.Errorf("%s, %v, %d-byte chunks: stream differs\n got %.300q\nwant %.300q", c.name, kind, size, body, want.Body)
				}
				if binary := kind != oip.MLServer; binary != (got.Parts != nil) || binary == (got.Body != nil) {
					t.Errorf("%s, %v: %d parts and a %d-byte Body", c.name, kind, len(got.Parts), len(got.Body))
				}
				if kind != oip.MLServer && c.parts != 0 && len(got.Parts) != c.parts {
					t.Errorf("%s, %v: %d parts, want %d (the header, each data block, each built block)", c.name, kind, len(got.Parts), c.parts)
				}
				got.Release()
				got.Release()
				if got.Len() != 0 || got.Parts != nil {
					t.Errorf("%s, %v: Release left %d bytes", c.name, kind, got.Len())
				}
			}
		}
	}
	var zero V2Request
	zero.Release()
	if zero.Len() != 0 || len(zero.Chunks()) != 1 {
		t.Errorf("zero V2Request: Len %d, %d chunks", zero.Len(), len(zero.Chunks()))
	}
}

// streamRequest writes body to a RequestStream in chunks of size bytes,
// each copied into one reused buffer as a proxy receives them.
func streamRequest(resolve tfrequest.Resolver, opt RequestOptions, body []byte, size int) (V2Request, Exchange, error) {
	s := predict.NewRequestStream(resolve, opt)
	buf := make([]byte, size)
	for p := 0; p < len(body); p += size {
		n := copy(buf, body[p:])
		if err := s.Write(buf[:n]); err != nil {
			return V2Request{}, Exchange{}, err
		}
		clear(buf)
	}
	return s.Close()
}
