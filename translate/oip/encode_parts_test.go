package oip

import (
	"bytes"
	"strings"
	"testing"
	"unsafe"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// splitData cuts t's data into pieces of at most every elements (a last
// empty piece too, as a block just started would be).
func splitData(t *tensor.Tensor, every int) [][]byte {
	step := every * t.DataType.Size()
	var pieces [][]byte
	for d := t.Data; len(d) > 0; {
		n := min(step, len(d))
		pieces = append(pieces, d[:n:n])
		d = d[n:]
	}
	return append(pieces, t.Data[len(t.Data):])
}

// TestEncodeRequestParts: the parts concatenate to EncodeRequest's body for
// every kind and datatype, however the data is cut, and the fixed-size
// blocks of the binary extension are the pieces themselves, not copies.
func TestEncodeRequestParts(t *testing.T) {
	inputs := []tensor.Tensor{
		fp32T("x", []int64{2, 3}, 1, -2, 3.5, 0, 1e-7, -0),
		fp64T("d", []int64{3}, 0.1, 2, -3),
		fp16T("h", []int64{3}, 1, 0.5, -2),
		int32T("i", []int64{4}, 1, -1, 1<<30, 7),
		int64T("l", nil, -5),
		uint64T("u", []int64{2}, 1<<63, 3),
		boolT("b", []int64{3}, true, false, true),
		bytesT("s", []int64{2}, "ab", ""),
		fp32T("empty", []int64{0, 3}),
	}
	withBF16 := append([]tensor.Tensor{bf16T("w", []int64{3}, 1, 2, 3)}, inputs...)
	for _, kind := range []ServerKind{Triton, KServe, MLServer} {
		ins := inputs
		if kind == Triton {
			ins = withBF16
		}
		opt := EncodeOptions{Kind: kind, ID: "r"}
		want, wantHL, wantCT, err := EncodeRequest(nil, ins, opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, every := range []int{1, 2, 1000} {
			data := func(i int) [][]byte { return splitData(&ins[i], every) }
			parts, hl, ct, err := EncodeRequestParts(ins, data, opt)
			if err != nil {
				t.Fatalf("%v every %d: %v", kind, every, err)
			}
			if got := bytes.Join(parts, nil); !bytes.Equal(got, want) || hl != wantHL || ct != wantCT {
				t.Errorf("%v every %d: parts differ from EncodeRequest (header length %d, want %d)\n got %q\nwant %q", kind, every, hl, wantHL, got, want)
			}
			if kind == MLServer {
				if len(parts) != 1 {
					t.Errorf("MLServer: %d parts, want 1", len(parts))
				}
				continue
			}
			if len(parts[0]) != hl {
				t.Errorf("%v: first part is %d bytes, want the %d-byte header", kind, len(parts[0]), hl)
			}
			// Every piece of a fixed-size non-BOOL input is sent in place.
			for i := range ins {
				if ins[i].DataType == tensor.Bytes || ins[i].DataType == tensor.Bool {
					continue
				}
				for _, p := range data(i) {
					if len(p) > 0 && !aliased(parts, p) {
						t.Errorf("%v every %d: a piece of %s was copied", kind, every, ins[i].Name)
					}
				}
			}
		}
	}
}

// aliased reports whether one of parts starts where p does.
func aliased(parts [][]byte, p []byte) bool {
	for _, q := range parts {
		if len(q) > 0 && unsafe.SliceData(q) == unsafe.SliceData(p) {
			return true
		}
	}
	return false
}

// TestEncodeRequestPartsErrors: pieces that do not add up to the shape, or
// split an element, are an internal error; the server checks still apply.
func TestEncodeRequestPartsErrors(t *testing.T) {
	x := fp32T("x", []int64{2}, 1, 2)
	cases := []struct {
		name   string
		kind   ServerKind
		inputs []tensor.Tensor
		pieces [][]byte
		code   apierr.Code
		msg    string
	}{
		{"short", Triton, []tensor.Tensor{x}, [][]byte{x.Data[:4]}, apierr.Internal, "malformed tensor for input 'x'"},
		{"long", MLServer, []tensor.Tensor{x}, [][]byte{x.Data, x.Data[:4]}, apierr.Internal, "malformed tensor for input 'x'"},
		{"split element", KServe, []tensor.Tensor{x}, [][]byte{x.Data[:2], x.Data[2:]}, apierr.Internal, "malformed tensor for input 'x'"},
		{"kserve bf16", KServe, []tensor.Tensor{bf16T("w", []int64{1}, 1)}, nil, apierr.InvalidArgument, "datatype BF16"},
		{"unknown kind", ServerKind(9), nil, nil, apierr.Internal, "unknown server kind"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := func(i int) [][]byte {
				if tc.pieces != nil {
					return tc.pieces
				}
				return [][]byte{tc.inputs[i].Data}
			}
			parts, _, _, err := EncodeRequestParts(tc.inputs, data, EncodeOptions{Kind: tc.kind})
			e := wantAPIErr(t, err, tc.code)
			if !strings.Contains(e.Msg, tc.msg) || parts != nil {
				t.Errorf("message %q lacks %q, or parts %q", e.Msg, tc.msg, parts)
			}
		})
	}
}
