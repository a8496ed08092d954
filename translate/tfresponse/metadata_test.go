package tfresponse

import (
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

const wantMetadata = `{
"model_spec":{
 "name": "m",
 "version": "3",
 "signature_name": ""
}
,
"metadata": {"signature_def": {
 "signature_def": {
  "serving_default": {
   "inputs": {
    "x": {
     "name": "x:0",
     "dtype": "DT_FLOAT",
     "tensor_shape": {
      "dim": [
       {
        "size": "-1",
        "name": ""
       },
       {
        "size": "2",
        "name": ""
       }
      ],
      "unknown_rank": false
     }
    },
    "y": {
     "name": "y:0",
     "dtype": "DT_STRING",
     "tensor_shape": {
      "dim": [],
      "unknown_rank": false
     }
    }
   },
   "outputs": {
    "scores": {
     "name": "scores:0",
     "dtype": "DT_HALF",
     "tensor_shape": {
      "dim": [
       {
        "size": "-1",
        "name": ""
       }
      ],
      "unknown_rank": false
     }
    }
   },
   "method_name": "tensorflow/serving/predict",
   "defaults": {}
  }
 }
}
}
}
`

const wantMetadataEmpty = `{
"model_spec":{
 "name": "",
 "signature_name": ""
}
,
"metadata": {"signature_def": {
 "signature_def": {
  "serving_default": {
   "inputs": {},
   "outputs": {},
   "method_name": "tensorflow/serving/predict",
   "defaults": {}
  }
 }
}
}
}
`

func TestMetadata(t *testing.T) {
	sig := &tensor.Signature{
		Model: "m",
		Inputs: []tensor.Spec{
			{Name: "y", DataType: tensor.Bytes},
			{Name: "x", DataType: tensor.FP32, Shape: []int64{-1, 2}},
		},
		Outputs: []tensor.Spec{{Name: "scores", DataType: tensor.FP16, Shape: []int64{-1}}},
		Batched: true,
	}
	if got := string(Metadata([]byte("> "), sig, "3")); got != "> "+wantMetadata {
		t.Errorf("Metadata:\n got %q\nwant %q", got, "> "+wantMetadata)
	}
	if sig.Inputs[0].Name != "y" {
		t.Error("Metadata reordered the caller's signature")
	}
	if got := string(Metadata(nil, nil, "")); got != wantMetadataEmpty {
		t.Errorf("Metadata(nil):\n got %q\nwant %q", got, wantMetadataEmpty)
	}
}
