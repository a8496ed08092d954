package translate

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// respBody builds a v2 binary-extension response body: the JSON header
// listing outputs (their binary_data_size taken from the blocks), then the
// blocks. It returns the body and the header length.
func respBody(outputs []respOut) ([]byte, int) {
	header := []byte(`{"model_name":"m","outputs":[`)
	var blocks []byte
	for i, o := range outputs {
		if i > 0 {
			header = append(header, ',')
		}
		header = append(header, `{"name":"`+o.name+`","datatype":"`+o.datatype+`","shape":[`...)
		for j, d := range o.shape {
			if j > 0 {
				header = append(header, ',')
			}
			header = strconv.AppendInt(header, d, 10)
		}
		header = append(header, `],"parameters":{"binary_data_size":`...)
		header = strconv.AppendInt(header, int64(len(o.block)), 10)
		header = append(header, "}}"...)
		blocks = append(blocks, o.block...)
	}
	header = append(header, "]}"...)
	return append(header, blocks...), len(header)
}

type respOut struct {
	name, datatype string
	shape          []int64
	block          []byte
}

func respFP32(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func respBytes(vs ...string) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

func TestTranslateResponse(t *testing.T) {
	sig := &tensor.Signature{Model: "m", Outputs: []tensor.Spec{{Name: "y", DataType: tensor.FP32, Shape: []int64{-1, 2}}}, Batched: true}
	binBody, binLen := respBody([]respOut{{"y", "FP32", []int64{2, 2}, respFP32(2.5, 3, 0.1, 1e6)}})
	multiBody, multiLen := respBody([]respOut{
		{"y", "FP32", []int64{3}, respFP32(1, 2, 3)},
		{"label_bytes", "BYTES", nil, respBytes("cat")},
	})
	cases := []struct {
		name      string
		body      []byte
		headerLen int
		ex        Exchange
		want      string
	}{
		{"binary, row", binBody, binLen, Exchange{Format: tfjson.Row, Signature: sig},
			"{\n    \"predictions\": [[2.5, 3.0], [0.1, 1e+06]\n    ]\n}"},
		{"binary, columnar", binBody, binLen, Exchange{Format: tfjson.Columnar, Signature: sig},
			"{\n    \"outputs\": [\n        [\n            2.5,\n            3.0\n        ],\n        [\n            0.1,\n            1e+06\n        ]\n    ]\n}"},
		{"JSON only", []byte(`{"outputs":[{"name":"y","datatype":"INT64","shape":[2],"data":[9007199254740993,-1]}]}`), -1,
			Exchange{Format: tfjson.Row}, "{\n    \"predictions\": [9007199254740993, -1\n    ]\n}"},
		{"unbatched: one instance gets its batch dimension back", multiBody, multiLen, Exchange{Format: tfjson.Row, Unbatched: true},
			"{\n    \"predictions\": [\n        {\n            \"label_bytes\": {\n                \"b64\": \"Y2F0\"\n            },\n" +
				"            \"y\": [1.0, 2.0, 3.0]\n        }\n    ]\n}"},
		{"unbatched, columnar", multiBody, multiLen, Exchange{Format: tfjson.Columnar, Unbatched: true},
			"{\n    \"outputs\": {\n        \"label_bytes\": [\n            {\n                \"b64\": \"Y2F0\"\n            }\n        ],\n" +
				"        \"y\": [\n            [\n                1.0,\n                2.0,\n                3.0\n            ]\n        ]\n    }\n}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := append([]byte(nil), c.body...)
			got, err := predict.Response(body, c.headerLen, c.ex, tensor.Limits{})
			if err != nil {
				t.Fatalf("predict.Response: %v", err)
			}
			if string(got) != c.want {
				t.Errorf("predict.Response:\n got %q\nwant %q", got, c.want)
			}
			clear(body) // the answer must not alias the v2 body
			if string(got) != c.want {
				t.Error("the TF body aliases the v2 body")
			}
			// ResponseParts: the same bytes, in place, until released.
			ans, err := predict.ResponseParts(c.body, c.headerLen, c.ex, tensor.Limits{})
			if err != nil {
				t.Fatalf("predict.ResponseParts: %v", err)
			}
			if parts := string(ans.AppendTo(nil)); parts != c.want || ans.Len() != len(c.want) {
				t.Errorf("predict.ResponseParts: %d bytes\n got %q\nwant %q", ans.Len(), parts, c.want)
			}
			ans.Release()
			ans.Release() // the second does nothing
			if ans.Len() != 0 || ans.Parts() != nil {
				t.Errorf("a released Answer still has %d bytes in %d parts", ans.Len(), len(ans.Parts()))
			}
		})
	}
}

// TestResponsePartsReleased checks that an Answer's parts are the pool's
// memory, reused once released (so a transport must release them only
// after writing them), and untouched by another translation while held.
func TestResponsePartsReleased(t *testing.T) {
	body, headerLen, ex := imageResponse()
	want, err := predict.Response(body, headerLen, ex, tensor.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	held, err := predict.ResponseParts(body, headerLen, ex, tensor.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// Translations while held must take other memory.
	for range 3 {
		next, err := predict.ResponseParts(body, headerLen, ex, tensor.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if &next.Parts()[0][0] == &held.Parts()[0][0] {
			t.Fatal("a held answer's memory was handed out again")
		}
		next.Release()
	}
	if got := held.AppendTo(nil); string(got) != string(want) {
		t.Fatalf("a held answer changed: %d bytes, want %d", len(got), len(want))
	}
	held.Release()
}

func TestTranslateResponseErrors(t *testing.T) {
	ragged, raggedLen := respBody([]respOut{
		{"a", "FP32", []int64{2}, respFP32(1, 2)},
		{"b", "FP32", []int64{3}, respFP32(1, 2, 3)},
	})
	scalar, scalarLen := respBody([]respOut{{"s", "FP32", nil, respFP32(1)}})
	good, goodLen := respBody([]respOut{{"y", "FP32", []int64{2}, respFP32(1, 2)}})
	cases := []struct {
		name      string
		body      []byte
		headerLen int
		ex        Exchange
		code      apierr.Code
		msg       string // exact when set
	}{
		{"truncated binary block", good[:len(good)-1], goodLen, Exchange{Format: tfjson.Row}, apierr.BadGateway, ""},
		{"not JSON", []byte("<html>"), -1, Exchange{Format: tfjson.Row}, apierr.BadGateway, ""},
		{"row format, outputs of different batch sizes", ragged, raggedLen, Exchange{Format: tfjson.Row},
			apierr.InvalidArgument, "Tensor name: b has inconsistent batch size: 3 expecting: 2"},
		{"row format, scalar output", scalar, scalarLen, Exchange{Format: tfjson.Row},
			apierr.InvalidArgument, "Tensor name: s has no shape information "},
		{"no outputs", []byte(`{"outputs":[]}`), -1, Exchange{Format: tfjson.Row},
			apierr.InvalidArgument, "Cannot convert empty tensor map to JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := predict.Response(c.body, c.headerLen, c.ex, tensor.Limits{})
			var e *apierr.Error
			if !errors.As(err, &e) {
				t.Fatalf("error = %v (body %q), want *apierr.Error", err, got)
			}
			if e.Code != c.code || (c.msg != "" && e.Msg != c.msg) {
				t.Errorf("error = %s %q, want %s %q", e.Code, e.Msg, c.code, c.msg)
			}
			if got != nil {
				t.Errorf("body %q returned with an error", got)
			}
		})
	}
	// Columnar format has no batch check: the same ragged outputs pass.
	if _, err := predict.Response(ragged, raggedLen, Exchange{Format: tfjson.Columnar}, tensor.Limits{}); err != nil {
		t.Errorf("columnar ragged outputs: %v", err)
	}
}
