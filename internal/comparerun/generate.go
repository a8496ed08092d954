package comparerun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// GenerateOptions say what requests Generate builds.
type GenerateOptions struct {
	Models []string
	N      int // requests per model
	Seed   uint64
	Batch  int // the size of a -1 batch dimension (and of other -1 dimensions)
	// MaxElements bounds one request's elements, so that a model with
	// huge inputs is refused rather than exhausting memory.
	MaxElements int64
	// Instances writes TF's row format ({"instances": [...]}, one item
	// per batch element) instead of the columnar {"inputs": {...}}.
	Instances bool
}

// tfMetadata is the part of TF's GET /v1/models/M/metadata answer that
// says what a predict request takes.
type tfMetadata struct {
	Metadata struct {
		SignatureDef struct {
			SignatureDef map[string]struct {
				Inputs     map[string]tensorInfo `json:"inputs"`
				MethodName string                `json:"method_name"`
			} `json:"signature_def"`
		} `json:"signature_def"`
	} `json:"metadata"`
}

type tensorInfo struct {
	DType       string `json:"dtype"`
	TensorShape struct {
		Dim []struct {
			Size json.Number `json:"size"` // TF writes int64 as a string; numbers are taken too
		} `json:"dim"`
		UnknownRank bool `json:"unknown_rank"`
	} `json:"tensor_shape"`
}

// UnmarshalJSON accepts the size as a string or a number.
func (t *tensorInfo) UnmarshalJSON(b []byte) error {
	type plain tensorInfo
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode((*plain)(t))
}

// Generate builds o.N predict requests per model from the model's
// serving_default signature, fetched from base (a TF REST URL), with
// seeded random values of each input's dtype and shape, in TF's
// columnar "inputs" format or its row "instances" format.
func Generate(ctx context.Context, c *http.Client, base string, o GenerateOptions) ([]Request, error) {
	var out []Request
	for mi, model := range o.Models {
		if !modelName.MatchString(model) {
			return nil, fmt.Errorf("model %q: want a model name (letters, digits, _ . -)", model)
		}
		inputs, err := fetchInputs(ctx, c, base, model)
		if err != nil {
			return nil, err
		}
		// Each body is built when it is sent, from a seed of its own: a
		// run holds only the bodies in flight, and a request is the same
		// whatever the order requests are built in.
		build := func(i int) func() ([]byte, error) {
			return func() ([]byte, error) {
				body, err := buildBody(rand.New(rand.NewPCG(o.Seed, uint64(mi)<<32|uint64(i))), inputs, o)
				if err != nil {
					return nil, fmt.Errorf("model %s: %w", model, err)
				}
				return body, nil
			}
		}
		// The first is built now, so that a model tfsbridge cannot
		// generate for is a failure before anything is sent.
		if _, err := build(0)(); err != nil {
			return nil, err
		}
		for i := range o.N {
			out = append(out, Request{Model: model, Verb: "predict", build: build(i)})
		}
	}
	return out, nil
}

// namedInput is a signature input, in name order for reproducible bodies.
type namedInput struct {
	name string
	info tensorInfo
}

func fetchInputs(ctx context.Context, c *http.Client, base, model string) ([]namedInput, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models/"+model+"/metadata", nil)
	if err != nil {
		return nil, err
	}
	status, body, err := do(c, req, 16<<20)
	if err != nil {
		return nil, fmt.Errorf("model %s metadata: %w", model, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("model %s metadata: %d %s", model, status, clipText(body))
	}
	var md tfMetadata
	if err := json.Unmarshal(body, &md); err != nil {
		return nil, fmt.Errorf("model %s metadata: %w", model, err)
	}
	sig, ok := md.Metadata.SignatureDef.SignatureDef["serving_default"]
	if !ok || len(sig.Inputs) == 0 {
		return nil, fmt.Errorf("model %s metadata: no serving_default signature with inputs", model)
	}
	var ins []namedInput
	for name, info := range sig.Inputs {
		ins = append(ins, namedInput{name, info})
	}
	slices.SortFunc(ins, func(a, b namedInput) int { return strings.Compare(a.name, b.name) })
	return ins, nil
}

// genInput is one input ready to generate: its full shape and values.
type genInput struct {
	name  string
	shape []int64
	gen   func([]byte, *rand.Rand) []byte
}

// buildBody writes {"inputs": {name: nested values, ...}}, or with
// o.Instances {"instances": [item, ...]} where an item is the one input's
// value or {name: value, ...}.
func buildBody(rng *rand.Rand, ins []namedInput, o GenerateOptions) ([]byte, error) {
	var gs []genInput
	var total int64
	for _, in := range ins {
		shape := []int64{int64(o.Batch)} // unknown rank: a batch of scalars
		batched := true
		if !in.info.TensorShape.UnknownRank {
			shape = shape[:0]
			for i, d := range in.info.TensorShape.Dim {
				n, err := d.Size.Int64()
				if err != nil {
					return nil, fmt.Errorf("input %s: dimension %q", in.name, d.Size)
				}
				if n < 0 {
					n = int64(o.Batch)
				}
				shape = append(shape, n)
				if i == 0 {
					batched = d.Size.String() == "-1"
				}
			}
			batched = batched && len(shape) > 0
		}
		n := int64(1)
		for _, d := range shape {
			n *= d
			if total+n > o.MaxElements {
				return nil, fmt.Errorf("input %s: shape %v is more than %d elements", in.name, shape, o.MaxElements)
			}
		}
		total += n
		gen, err := generator(in.info.DType)
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", in.name, err)
		}
		if o.Instances && !batched {
			return nil, fmt.Errorf("input %s has no batch dimension (-1 first): generate the columnar \"inputs\" format", in.name)
		}
		gs = append(gs, genInput{in.name, shape, gen})
	}
	if !o.Instances {
		b := []byte(`{"inputs": {`)
		for i, g := range gs {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = strconv.AppendQuote(b, g.name)
			b = append(b, ": "...)
			b = nest(b, g.shape, rng, g.gen)
		}
		return append(b, "}}"...), nil
	}
	b := []byte(`{"instances": [`)
	for item := range o.Batch {
		if item > 0 {
			b = append(b, ", "...)
		}
		if len(gs) == 1 {
			b = nest(b, gs[0].shape[1:], rng, gs[0].gen)
			continue
		}
		b = append(b, '{')
		for i, g := range gs {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = strconv.AppendQuote(b, g.name)
			b = append(b, ": "...)
			b = nest(b, g.shape[1:], rng, g.gen)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// nest writes values of shape, row-major.
func nest(b []byte, shape []int64, rng *rand.Rand, gen func([]byte, *rand.Rand) []byte) []byte {
	if len(shape) == 0 {
		return gen(b, rng)
	}
	b = append(b, '[')
	for i := range shape[0] {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = nest(b, shape[1:], rng, gen)
	}
	return append(b, ']')
}

// generator returns the writer of one random value of a TF dtype. Floats
// have three decimals, so that FP16 and BF16 inputs round the same way on
// both sides; integers are small and non-negative, so that every integer
// type holds them.
func generator(dtype string) (func([]byte, *rand.Rand) []byte, error) {
	switch dtype {
	case "DT_FLOAT", "DT_DOUBLE", "DT_HALF", "DT_BFLOAT16":
		return func(b []byte, r *rand.Rand) []byte {
			return strconv.AppendFloat(b, float64(r.IntN(2001)-1000)/1000, 'f', 3, 64)
		}, nil
	case "DT_INT8", "DT_INT16", "DT_INT32", "DT_INT64", "DT_UINT8", "DT_UINT16", "DT_UINT32", "DT_UINT64":
		return func(b []byte, r *rand.Rand) []byte { return strconv.AppendInt(b, int64(r.IntN(100)), 10) }, nil
	case "DT_BOOL":
		return func(b []byte, r *rand.Rand) []byte { return strconv.AppendBool(b, r.IntN(2) == 1) }, nil
	case "DT_STRING":
		return func(b []byte, r *rand.Rand) []byte {
			b = append(b, '"')
			for range 1 + r.IntN(8) {
				b = append(b, byte('a'+r.IntN(26)))
			}
			return append(b, '"')
		}, nil
	}
	return nil, fmt.Errorf("cannot generate values of dtype %q", dtype)
}
