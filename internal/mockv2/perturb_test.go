package mockv2

import (
	"math"
	"strings"
	"testing"
)

// A perturbed model's floating-point outputs move by exactly the delta
// (as far as the datatype holds it); integers, strings and other models
// do not move.
func TestPerturb(t *testing.T) {
	url := startServer(t, Options{Perturb: map[string]float64{"half_plus_two": 0.25, "multi_out": 0.5, "mixed_types": -1}})
	for _, tc := range []struct {
		model, body, want string
	}{
		{"half_plus_two", `{"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":[1,2,5]}]}`, `"data":[2.75,3.25,4.75]`},
		{"multi_out", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1,3]}]}`, `"name":"argmax","datatype":"INT64","shape":[1],"data":[1]`},
		{"multi_out", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1,3]}]}`, `"name":"sum","datatype":"FP32","shape":[1],"data":[4.5]`},
		{"mixed_types", `{"inputs":[{"name":"flag","datatype":"BOOL","shape":[1,1],"data":[true]},{"name":"count","datatype":"INT64","shape":[1,1],"data":[3]},{"name":"value","datatype":"FP64","shape":[1,1],"data":[1.5]}]}`, `"name":"scaled","datatype":"FP64","shape":[1,1],"data":[3.5]`},
		{"fixed3", `{"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":[1,2,3]}]}`, `"data":[3.0,2.0,1.0]`},
	} {
		r := call(t, "POST", url+"/v2/models/"+tc.model+"/infer", []byte(tc.body))
		if r.status != 200 || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("%s: %d %s, want %s", tc.model, r.status, r.body, tc.want)
		}
	}
}

func TestPerturbRefusesUnknownModels(t *testing.T) {
	for _, p := range []map[string]float64{{"no_such_model": 1}, {"half_plus_two": math.Inf(1)}} {
		if _, err := New(Options{Perturb: p}); err == nil {
			t.Errorf("New(Perturb: %v) succeeded", p)
		}
	}
}
