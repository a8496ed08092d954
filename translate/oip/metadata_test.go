package oip

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/test/conformance"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

func TestParseModelMetadataConformance(t *testing.T) {
	ran := false
	for _, c := range conformance.MustLoad(t, "oip_cases.json") {
		if c.ID != "triton-model-metadata-batch-dim" {
			continue
		}
		ran = true
		var exp struct {
			JSON json.RawMessage `json:"json"`
		}
		conformance.Decode(t, c.Expected, &exp)
		sig, err := ParseModelMetadata(exp.JSON)
		if err != nil {
			t.Fatal(err)
		}
		want := &tensor.Signature{
			Model: "simple", Versions: []string{"1"}, Platform: "onnxruntime_onnx",
			Inputs: []tensor.Spec{
				{Name: "INPUT0", DataType: tensor.Int32, Shape: []int64{-1, 16}},
				{Name: "INPUT1", DataType: tensor.Int32, Shape: []int64{-1, 16}},
			},
			Outputs: []tensor.Spec{
				{Name: "OUTPUT0", DataType: tensor.Int32, Shape: []int64{-1, 16}},
				{Name: "OUTPUT1", DataType: tensor.Int32, Shape: []int64{-1, 16}},
			},
			Batched: true,
		}
		if !reflect.DeepEqual(sig, want) {
			t.Errorf("got %+v\nwant %+v", sig, want)
		}
		// The config settles the batch dimension either way.
		if err := ApplyTritonConfig(sig, []byte(`{"name":"simple","max_batch_size":8,"input":[{"name":"INPUT0","data_type":"TYPE_INT32","dims":["16"]}]}`)); err != nil {
			t.Fatal(err)
		}
		if !sig.Batched || sig.MaxBatchSize != 8 {
			t.Errorf("after config: Batched %v, MaxBatchSize %d; want true, 8", sig.Batched, sig.MaxBatchSize)
		}
	}
	if !ran {
		t.Fatal("vector triton-model-metadata-batch-dim not found")
	}
}

func TestParseModelMetadata(t *testing.T) {
	cases := []struct {
		name string
		body string
		want *tensor.Signature
	}{
		{"kserve empty", `{"name":"m","versions":null,"platform":"","inputs":[],"outputs":[]}`,
			&tensor.Signature{Model: "m"}},
		{"mlserver parameters", `{"name":"sum","versions":["v1.2.3"],"platform":"","inputs":[{"name":"in","datatype":"FP32","shape":[-1,3],"parameters":{"content_type":"np"}}],"outputs":[{"name":"out","datatype":"BYTES","shape":[-1],"parameters":null}],"parameters":{"content_type":"np"}}`,
			&tensor.Signature{Model: "sum", Versions: []string{"v1.2.3"},
				Inputs:  []tensor.Spec{{Name: "in", DataType: tensor.FP32, Shape: []int64{-1, 3}}},
				Outputs: []tensor.Spec{{Name: "out", DataType: tensor.Bytes, Shape: []int64{-1}}}, Batched: true}},
		{"variable non-batch dim", `{"name":"m","inputs":[{"name":"a","datatype":"INT64","shape":[-1]},{"name":"b","datatype":"INT64","shape":[4,-1]}],"outputs":[]}`,
			&tensor.Signature{Model: "m", Inputs: []tensor.Spec{
				{Name: "a", DataType: tensor.Int64, Shape: []int64{-1}},
				{Name: "b", DataType: tensor.Int64, Shape: []int64{4, -1}}}}},
		{"scalar input, lower-case datatype", `{"name":"m","inputs":[{"name":"a","datatype":"fp16","shape":[]}]}`,
			&tensor.Signature{Model: "m", Inputs: []tensor.Spec{{Name: "a", DataType: tensor.FP16, Shape: []int64{}}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseModelMetadata([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseModelMetadataErrors(t *testing.T) {
	cases := []struct{ body, msg string }{
		{``, "invalid model metadata"},
		{`[]`, "invalid model metadata"},
		{`{"name":"m","inputs":[{"name":"a","datatype":"STRING","shape":[1]}]}`, `input "a" has unknown datatype "STRING"`},
		{`{"name":"m","inputs":[{"name":"a","datatype":"FP32"}]}`, `input "a" has no shape`},
		{`{"name":"m","inputs":[{"name":"a","shape":[1]}]}`, `input "a" has no datatype`},
		{`{"name":"m","outputs":[{"datatype":"FP32","shape":[1]}]}`, "output 0 has no name"},
		{`{"name":"m","inputs":[{"name":"a","datatype":"FP32","shape":[-2]}]}`, "invalid dimension -2"},
		{`{"name":"m","inputs":[{"name":"a","datatype":"FP32","shape":[1.5]}]}`, "invalid model metadata"},
		{`{"name":"m","inputs":[{"name":"a","datatype":"FP32","shape":[1]},{"name":"a","datatype":"FP32","shape":[1]}]}`, `duplicate input "a"`},
		{`{"name":"m","versions":[1]}`, "invalid model metadata"},
		// Regression: 100 000 inputs made every request allocate 11 MB.
		{`{"name":"m","inputs":[` + strings.Repeat(`{"name":"a","datatype":"FP32","shape":[1]},`, maxSignatureTensors) + `{"name":"b","datatype":"FP32","shape":[1]}]}`,
			"4097 inputs, more than the limit of 4096"},
		// Regression (issue 13): 15 MiB of metadata listing millions of
		// dimensions or versions became answers of hundreds of MB.
		{`{"name":"m","inputs":[{"name":"a","datatype":"FP32","shape":[` + strings.Repeat("-1,", maxSignatureDims/2) +
			`-1]}],"outputs":[{"name":"b","datatype":"FP32","shape":[` + strings.Repeat("-1,", maxSignatureDims/2) + `-1]}]}`,
			"65538 dimensions in all, more than the limit of 65536"},
		{`{"name":"m","versions":[` + strings.Repeat(`"1",`, maxVersions) + `"2"]}`, "4097 versions, more than the limit of 4096"},
	}
	for _, tc := range cases {
		_, err := ParseModelMetadata([]byte(tc.body))
		e := wantAPIErr(t, err, apierr.BadGateway)
		if !strings.Contains(e.Msg, tc.msg) {
			t.Errorf("%s: message %q lacks %q", tc.body, e.Msg, tc.msg)
		}
	}
}

func TestApplyTritonConfig(t *testing.T) {
	cases := []struct {
		config  string
		batched bool
		max     int64
		ok      bool
	}{
		{`{"max_batch_size":8}`, true, 8, true},
		{`{"max_batch_size":"4"}`, true, 4, true},
		{`{"max_batch_size":0}`, false, 0, true},
		{`{"name":"m"}`, false, 0, true}, // protobuf JSON omits zero values
		{`{"max_batch_size":-1}`, false, 0, false},
		{`{"max_batch_size":1.5}`, false, 0, false},
		{`{"max_batch_size":99999999999}`, false, 0, false},
		{`{"max_batch_size":true}`, false, 0, false},
		{`nope`, false, 0, false},
	}
	for _, tc := range cases {
		// Start from the opposite of the expectation, so the test sees the
		// config, not the leftover value.
		sig := &tensor.Signature{Batched: !tc.batched, MaxBatchSize: 77}
		err := ApplyTritonConfig(sig, []byte(tc.config))
		if !tc.ok {
			wantAPIErr(t, err, apierr.BadGateway)
			continue
		}
		if err != nil || sig.Batched != tc.batched || sig.MaxBatchSize != tc.max {
			t.Errorf("%s: Batched %v, MaxBatchSize %d, err %v; want %v, %d", tc.config, sig.Batched, sig.MaxBatchSize, err, tc.batched, tc.max)
		}
	}
	if err := ApplyTritonConfig(nil, []byte(`{}`)); err == nil {
		t.Error("nil signature accepted")
	}
}
