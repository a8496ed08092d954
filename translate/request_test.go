package translate

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

type v2Input struct {
	Name       string  `json:"name"`
	Shape      []int64 `json:"shape"`
	Datatype   string  `json:"datatype"`
	Data       []any   `json:"data"`
	Parameters struct {
		BinaryDataSize int `json:"binary_data_size"`
	} `json:"parameters"`
}

type v2Header struct {
	Inputs     []v2Input      `json:"inputs"`
	Outputs    []any          `json:"outputs"`
	Parameters map[string]any `json:"parameters"`
}

func decodeHeader(t *testing.T, req V2Request) (v2Header, []byte) {
	t.Helper()
	hdr, rest := req.Body, []byte(nil)
	if req.HeaderLength >= 0 {
		hdr, rest = req.Body[:req.HeaderLength], req.Body[req.HeaderLength:]
	}
	var h v2Header
	if err := json.Unmarshal(hdr, &h); err != nil {
		t.Fatalf("v2 header %q: %v", hdr, err)
	}
	return h, rest
}

func floats(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func TestTranslateRequest(t *testing.T) {
	batched := &tensor.Signature{Model: "m", Batched: true,
		Inputs: []tensor.Spec{{Name: "x", DataType: tensor.FP32, Shape: []int64{-1, 2}}}}
	flat := &tensor.Signature{Model: "m",
		Inputs: []tensor.Spec{{Name: "x", DataType: tensor.FP32, Shape: []int64{2}}}}
	rank2 := &tensor.Signature{Model: "m",
		Inputs: []tensor.Spec{{Name: "x", DataType: tensor.FP32, Shape: []int64{1, 2}}}}
	multi := &tensor.Signature{Model: "m", Inputs: []tensor.Spec{
		{Name: "a", DataType: tensor.FP32, Shape: []int64{2}},
		{Name: "b", DataType: tensor.FP32, Shape: []int64{1, 1}}}}
	tests := []struct {
		name      string
		sig       *tensor.Signature
		body      string
		format    tfjson.Format
		shapes    [][]int64
		unbatched bool
		values    []float32
	}{
		{"row batched", batched, `{"instances": [[1, 2], [3, 4]]}`, tfjson.Row, [][]int64{{2, 2}}, false, []float32{1, 2, 3, 4}},
		{"row batched single", batched, `{"instances": [[1, 2]]}`, tfjson.Row, [][]int64{{1, 2}}, false, []float32{1, 2}},
		{"row unbatched single", flat, `{"instances": [[1, 2]]}`, tfjson.Row, [][]int64{{2}}, true, []float32{1, 2}},
		{"row unbatched two instances", flat, `{"instances": [[1, 2], [3, 4]]}`, tfjson.Row, [][]int64{{2, 2}}, false, []float32{1, 2, 3, 4}},
		{"row declared rank already includes 1", rank2, `{"instances": [[1, 2]]}`, tfjson.Row, [][]int64{{1, 2}}, false, []float32{1, 2}},
		{"row unbatched needs every input", multi, `{"instances": [{"a": [1, 2], "b": [3]}]}`, tfjson.Row, [][]int64{{1, 2}, {1, 1}}, false, []float32{1, 2, 3}},
		{"columnar never unbatched", flat, `{"inputs": [[1, 2]]}`, tfjson.Columnar, [][]int64{{1, 2}}, false, []float32{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, ex, err := predict.Request([]byte(tt.body), func(string) (*tensor.Signature, error) { return tt.sig, nil },
				RequestOptions{Kind: oip.Triton, ID: "r1"})
			if err != nil {
				t.Fatal(err)
			}
			if ex.Format != tt.format || ex.Unbatched != tt.unbatched || ex.Signature != tt.sig {
				t.Errorf("exchange %+v, want format %v unbatched %v", ex, tt.format, tt.unbatched)
			}
			if req.ContentType != oip.ContentTypeBinary || req.HeaderLength <= 0 {
				t.Errorf("content type %q header length %d", req.ContentType, req.HeaderLength)
			}
			h, blocks := decodeHeader(t, req)
			if len(h.Inputs) != len(tt.shapes) {
				t.Fatalf("%d v2 inputs, want %d", len(h.Inputs), len(tt.shapes))
			}
			for i, in := range h.Inputs {
				if !slices.Equal(in.Shape, tt.shapes[i]) || in.Datatype != "FP32" {
					t.Errorf("input %s: shape %v %s, want %v FP32", in.Name, in.Shape, in.Datatype, tt.shapes[i])
				}
			}
			if got := floats(blocks); !slices.Equal(got, tt.values) {
				t.Errorf("blocks %v, want %v", got, tt.values)
			}
			if h.Parameters["binary_data_output"] != true || h.Outputs != nil {
				t.Errorf("parameters %v outputs %v", h.Parameters, h.Outputs)
			}
		})
	}
}

func TestTranslateRequestJSON(t *testing.T) {
	sig := &tensor.Signature{Model: "m", Inputs: []tensor.Spec{{Name: "x", DataType: tensor.Int64, Shape: []int64{2}}}}
	req, ex, err := predict.Request([]byte(`{"instances": [[9007199254740993, -2]]}`),
		func(string) (*tensor.Signature, error) { return sig, nil }, RequestOptions{Kind: oip.MLServer})
	if err != nil {
		t.Fatal(err)
	}
	if req.HeaderLength != -1 || req.ContentType != oip.ContentTypeJSON || !ex.Unbatched {
		t.Errorf("header length %d, content type %q, unbatched %v", req.HeaderLength, req.ContentType, ex.Unbatched)
	}
	dec := json.NewDecoder(bytes.NewReader(req.Body))
	dec.UseNumber()
	var h v2Header
	if err := dec.Decode(&h); err != nil {
		t.Fatalf("%s: %v", req.Body, err)
	}
	if len(h.Inputs) != 1 || !slices.Equal(h.Inputs[0].Shape, []int64{2}) || h.Inputs[0].Datatype != "INT64" ||
		fmt.Sprint(h.Inputs[0].Data) != "[9007199254740993 -2]" {
		t.Errorf("body %s", req.Body)
	}
}

func TestTranslateRequestErrors(t *testing.T) {
	sig := &tensor.Signature{Model: "m", Inputs: []tensor.Spec{{Name: "x", DataType: tensor.BF16}}}
	resolve := func(string) (*tensor.Signature, error) { return sig, nil }
	// A TF parse error comes back as TF's message.
	_, _, err := predict.Request([]byte(`{"instances": []}`), resolve, RequestOptions{})
	if e := apierr.As(err); e.Code != apierr.InvalidArgument || e.Msg != "JSON Value: {\n    \"instances\": []\n} No values in 'instances' array" {
		t.Errorf("parse error: %v", err)
	}
	// The resolver's error is returned as is.
	nf := apierr.New(apierr.NotFound, "Servable not found for request: Latest(m)")
	_, _, err = predict.Request([]byte(`{"instances": [1]}`), func(string) (*tensor.Signature, error) { return nil, nf }, RequestOptions{})
	if !errors.Is(err, nf) {
		t.Errorf("resolver error: %v", err)
	}
	// An encoder refusal (BF16 on MLServer) is a 400 too.
	_, _, err = predict.Request([]byte(`{"inputs": [1.5]}`), resolve, RequestOptions{Kind: oip.MLServer})
	if e := apierr.As(err); e.HTTPStatus() != 400 {
		t.Errorf("encoder error: %v", err)
	}
}
