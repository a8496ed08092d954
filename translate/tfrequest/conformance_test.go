package tfrequest

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/tfsbridge/tfsbridge/test/conformance"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

type reqInput struct {
	Method          string            `json:"method"`
	SignatureInputs map[string]string `json:"signature_inputs"`
	JSON            string            `json:"json"`
}

type reqExpected struct {
	Format        string      `json:"format"`
	SignatureName string      `json:"signature_name"`
	Tensors       []expTensor `json:"tensors"`
	Error         *expError   `json:"error"`
}

type expTensor struct {
	Name   string        `json:"name"`
	DType  string        `json:"dtype"`
	Shape  []int64       `json:"shape"`
	Values []json.Number `json:"values"`
}

type expError struct {
	HTTPStatus       int    `json:"http_status"`
	Code             string `json:"code"`
	MessageSubstring string `json:"message_substring"`
	Message          string `json:"message"`
}

// UnmarshalJSON keeps string values (NaN, "-0.0", DT_STRING contents) as
// json.Number too, so one slice holds every value kind.
func (t *expTensor) UnmarshalJSON(b []byte) error {
	var raw struct {
		Name   string            `json:"name"`
		DType  string            `json:"dtype"`
		Shape  []int64           `json:"shape"`
		Values []json.RawMessage `json:"values"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	t.Name, t.DType, t.Shape = raw.Name, raw.DType, raw.Shape
	for _, v := range raw.Values {
		var s string
		if json.Unmarshal(v, &s) == nil {
			t.Values = append(t.Values, json.Number("\x00"+s)) // marked string
			continue
		}
		t.Values = append(t.Values, json.Number(v))
	}
	return nil
}

// TestConformance replays every TF Serving request vector that concerns
// JSON → tensors.
func TestConformance(t *testing.T) {
	ran := 0
	for _, c := range conformance.MustLoad(t, "tfserving_cases.json") {
		if c.Direction != "request" {
			continue
		}
		t.Run(c.ID, func(t *testing.T) {
			if strings.HasPrefix(c.ID, "url-") {
				t.Skip("URL grammar: package route")
			}
			var in reqInput
			conformance.Decode(t, c.Input, &in)
			if in.Method != "" {
				t.Skip("classify/regress requests: package tfexample")
			}
			var exp reqExpected
			conformance.Decode(t, c.Expected, &exp)
			sig := &tensor.Signature{Model: "m"}
			names := make([]string, 0, len(in.SignatureInputs))
			for n := range in.SignatureInputs {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				dt, ok := tensor.ParseTF(in.SignatureInputs[n])
				if !ok {
					t.Fatalf("unknown dtype %s", in.SignatureInputs[n])
				}
				sig.Inputs = append(sig.Inputs, tensor.Spec{Name: n, DataType: dt})
			}
			if checkStream(t, []byte(in.JSON), fixed(sig), tensor.Limits{}) {
				t.Errorf("streaming decoder: undecided")
			}
			gotName := "\x00unset"
			req, err := Parse([]byte(in.JSON), func(name string) (*tensor.Signature, error) {
				gotName = name
				return sig, nil
			}, tensor.Limits{})
			if exp.Error != nil {
				if err == nil {
					t.Fatalf("want error %q, got success", exp.Error.Message)
				}
				e := apierr.As(err)
				if exp.Error.Message != "" && e.Msg != exp.Error.Message {
					t.Errorf("message\n got %q\nwant %q", e.Msg, exp.Error.Message)
				}
				if !strings.Contains(e.Msg, exp.Error.MessageSubstring) {
					t.Errorf("message %q lacks %q", e.Msg, exp.Error.MessageSubstring)
				}
				if e.HTTPStatus() != exp.Error.HTTPStatus || e.Code.String() != exp.Error.Code {
					t.Errorf("status %d %s, want %d %s", e.HTTPStatus(), e.Code, exp.Error.HTTPStatus, exp.Error.Code)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			defer req.Release()
			if gotName != exp.SignatureName || req.SignatureName != exp.SignatureName {
				t.Errorf("signature name %q / %q, want %q", gotName, req.SignatureName, exp.SignatureName)
			}
			if req.Format.String() != exp.Format {
				t.Errorf("format %v, want %s", req.Format, exp.Format)
			}
			if len(req.Inputs) != len(exp.Tensors) {
				t.Fatalf("%d tensors, want %d", len(req.Inputs), len(exp.Tensors))
			}
			for _, et := range exp.Tensors {
				i := slices.IndexFunc(req.Inputs, func(x tensor.Tensor) bool { return x.Name == et.Name })
				if i < 0 {
					t.Fatalf("no tensor %s", et.Name)
				}
				checkTensor(t, &req.Inputs[i], et)
			}
			ran++
		})
	}
	if ran == 0 {
		t.Fatal("no vector ran")
	}
}

func checkTensor(t *testing.T, got *tensor.Tensor, et expTensor) {
	t.Helper()
	if err := got.Validate(); err != nil {
		t.Fatalf("invalid tensor: %v", err)
	}
	if got.DataType.TFName() != et.DType {
		t.Errorf("%s: dtype %s, want %s", et.Name, got.DataType.TFName(), et.DType)
	}
	if !slices.Equal(got.Shape, et.Shape) && !(len(got.Shape) == 0 && len(et.Shape) == 0) {
		t.Errorf("%s: shape %v, want %v", et.Name, got.Shape, et.Shape)
	}
	if got.Len() != len(et.Values) {
		t.Fatalf("%s: %d values, want %d", et.Name, got.Len(), len(et.Values))
	}
	for i, v := range et.Values {
		s := string(v)
		str, isStr := strings.CutPrefix(s, "\x00")
		switch got.DataType {
		case tensor.Bytes:
			if !isStr || !bytes.Equal(got.Strings[i], []byte(str)) {
				t.Errorf("%s[%d] = %q, want %q", et.Name, i, got.Strings[i], str)
			}
		case tensor.FP32, tensor.FP64, tensor.FP16, tensor.BF16:
			want := conformance.MustFloat(t, json.RawMessage(strconv.Quote(str)), 64)
			var gotBits, wantBits uint64
			switch got.DataType {
			case tensor.FP32:
				gotBits = uint64(math.Float32bits(float32(got.Float64At(i))))
				wantBits = uint64(math.Float32bits(float32(want)))
			case tensor.FP64:
				gotBits, wantBits = math.Float64bits(got.Float64At(i)), math.Float64bits(want)
			case tensor.FP16:
				gotBits = uint64(float16.Frombits(uint16(got.Data[2*i]) | uint16(got.Data[2*i+1])<<8).Bits())
				wantBits = uint64(float16.Fromfloat32(float32(want)).Bits())
			default:
				gotBits = uint64(got.Data[2*i]) | uint64(got.Data[2*i+1])<<8
				wantBits = uint64(tensor.BF16FromFloat32(float32(want)))
			}
			if math.IsNaN(want) {
				if !math.IsNaN(got.Float64At(i)) {
					t.Errorf("%s[%d] = %v, want NaN", et.Name, i, got.Float64At(i))
				}
			} else if gotBits != wantBits {
				t.Errorf("%s[%d] bits %#x, want %#x (%s)", et.Name, i, gotBits, wantBits, str)
			}
		case tensor.Bool:
			want := str == "true" || s == "true"
			if (got.Data[i] != 0) != want {
				t.Errorf("%s[%d] = %d, want %v", et.Name, i, got.Data[i], want)
			}
		case tensor.Uint64:
			want, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if got.Uint64At(i) != want {
				t.Errorf("%s[%d] = %d, want %d", et.Name, i, got.Uint64At(i), want)
			}
		default:
			want, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			// Narrow types: the vector gives the value as stored.
			if got.Int64At(i) != want {
				t.Errorf("%s[%d] = %d, want %d", et.Name, i, got.Int64At(i), want)
			}
		}
	}
}
