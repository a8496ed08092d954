package oip

import (
	"testing"

	"github.com/tfsbridge/tfsbridge/test/conformance"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// fuzzLimits are small so the fuzzer reaches the limit checks.
var fuzzLimits = tensor.Limits{MaxDepth: 20, MaxElements: 1 << 16}

// FuzzDecodeResponse: no panic, and whatever is accepted is a valid tensor
// list within the element limit whose memory is bounded by the body that
// declared it.
func FuzzDecodeResponse(f *testing.F) {
	for _, c := range conformance.MustLoad(f, "oip_cases.json") {
		if _, ok := responseExpectations[c.ID]; ok {
			body, hl := responseBody(f, c)
			f.Add(body, hl)
		}
	}
	f.Add([]byte(`{"outputs":[{"name":"y","datatype":"BYTES","shape":[3],"parameters":{"binary_data_size":9}}]}`+"\x01\x00\x00\x00a\x00\x00\x00\x00"), 94)
	f.Add([]byte(`{"outputs":[{"name":"y","datatype":"FP32","shape":[1000000000],"data":[1]}]}`), -1)
	f.Add([]byte(`{"outputs":[{"name":"y","datatype":"BYTES","shape":[2,1],"data":[["a\u0000"],"b"]}]}`), -1)
	f.Add([]byte(`{"outputs":[{"name":"y","datatype":"INT8","shape":[2],"data":[[-128],[[127]]]}]}`), -1)
	f.Fuzz(func(t *testing.T, body []byte, hl int) {
		outs, err := DecodeResponse(body, hl, nil, fuzzLimits)
		if err != nil {
			if _, ok := err.(interface{ HTTPStatus() int }); !ok {
				t.Fatalf("error %T is not an *apierr.Error", err)
			}
			return
		}
		var elems, mem int64
		for i := range outs {
			o := &outs[i]
			if err := o.Validate(); err != nil {
				t.Fatalf("accepted an invalid tensor: %v", err)
			}
			n, _ := tensor.NumElements(o.Shape)
			elems += n
			mem += int64(len(o.Data)) + 24*int64(len(o.Strings)) + 8*int64(len(o.Shape))
		}
		if elems > fuzzLimits.MaxElements {
			t.Fatalf("%d elements accepted, limit %d", elems, fuzzLimits.MaxElements)
		}
		if mem > 64*int64(len(body))+4096 {
			t.Fatalf("%d bytes of tensors from a %d-byte body", mem, len(body))
		}
	})
}

// FuzzParseModelMetadata: no panic; an accepted signature has named,
// typed specs with dimensions >= -1, and Batched means a leading -1.
func FuzzParseModelMetadata(f *testing.F) {
	f.Add([]byte(`{"name":"simple","versions":["1"],"platform":"onnxruntime_onnx","inputs":[{"name":"INPUT0","datatype":"INT32","shape":[-1,16]}],"outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[-1,16]}]}`))
	f.Add([]byte(`{"name":"m","versions":null,"platform":"","inputs":[],"outputs":[]}`))
	f.Add([]byte(`{"name":"m","inputs":[{"name":"a","datatype":"fp16","shape":[],"parameters":{"content_type":"np"}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		sig, err := ParseModelMetadata(body)
		if err != nil {
			if _, ok := err.(interface{ HTTPStatus() int }); !ok {
				t.Fatalf("error %T is not an *apierr.Error", err)
			}
			return
		}
		for _, specs := range [][]tensor.Spec{sig.Inputs, sig.Outputs} {
			for _, s := range specs {
				if s.Name == "" || !s.DataType.Valid() {
					t.Fatalf("accepted spec %+v", s)
				}
				for _, d := range s.Shape {
					if d < -1 {
						t.Fatalf("accepted dimension %d", d)
					}
				}
			}
		}
		if sig.Batched && (len(sig.Inputs) == 0 || len(sig.Inputs[0].Shape) == 0 || sig.Inputs[0].Shape[0] != -1) {
			t.Fatalf("Batched without a leading -1: %+v", sig.Inputs)
		}
	})
}
