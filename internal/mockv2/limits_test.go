package mockv2

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHostileBodiesStayLinear sends multi-megabyte bodies shaped to make a
// naive parser quadratic (deep nesting repeated, thousands of members or
// inputs). Each must be answered quickly, whatever the answer.
func TestHostileBodiesStayLinear(t *testing.T) {
	const target = 4 << 20
	repeat := func(unit, sep string) string {
		n := target / (len(unit) + len(sep))
		return strings.Repeat(unit+sep, n-1) + unit
	}
	nest := strings.Repeat("[", 63) + "1" + strings.Repeat("]", 63)
	var members, inputs strings.Builder
	for i := range target / 24 {
		if i > 0 {
			members.WriteByte(',')
			inputs.WriteByte(',')
		}
		members.WriteString(`"k` + strconv.Itoa(i) + `":1`)
		inputs.WriteString(`{"name":"i` + strconv.Itoa(i) + `","datatype":"FP32","shape":[0],"data":[]}`)
	}
	bodies := map[string]string{
		"deep nesting repeated": `{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[` + repeat(nest, ",") + `]}]}`,
		"many parameters":       `{"parameters":{` + members.String() + `},"inputs":[]}`,
		"many inputs":           `{"inputs":[` + inputs.String() + `]}`,
		"many outputs":          `{"inputs":[],"outputs":[` + repeat(`{"name":"y"}`, ",") + `]}`,
	}
	for _, kind := range []string{"triton", "kserve", "mlserver"} {
		url := startServer(t, Options{Kind: kind})
		for name, body := range bodies {
			t.Run(kind+"/"+name, func(t *testing.T) {
				start := time.Now()
				r := call(t, "POST", url+"/v2/models/half_plus_two/infer", []byte(body), "Content-Type", jsonCT)
				// A bound for runaway work, generous for a busy machine.
				if d := time.Since(start); d > 30*time.Second {
					t.Errorf("answered %d after %v", r.status, d)
				}
				if r.status == 200 {
					t.Errorf("a hostile body was accepted: %.200s", r.body)
				}
			})
		}
	}
}
