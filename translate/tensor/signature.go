package tensor

import "slices"

// Spec describes one input or output of a model: its name, datatype and
// declared shape (-1 for a variable dimension).
type Spec struct {
	Name     string
	DataType DataType
	Shape    []int64
}

// Signature is what tfsbridge knows about a model: the v2 metadata turned
// into the equivalent of a TF SignatureDef. TF Serving needs it to parse a
// request at all (the dtype decides what JSON is legal, the input count
// decides row/columnar naming), and so do we.
type Signature struct {
	// Model is the model name; Versions the versions the server reports.
	Model    string
	Versions []string
	Platform string
	Inputs   []Spec
	Outputs  []Spec
	// Batched reports that dim 0 of every input and output is the batch
	// dimension (a leading -1; on Triton confirmed by max_batch_size > 0).
	Batched bool
	// MaxBatchSize is Triton's max_batch_size when known, else 0.
	MaxBatchSize int64
	// Wire, when set, is this signature in the v2 server's tensor names
	// (the model map renamed some): Inputs[i] and Outputs[i] here are
	// Wire.Inputs[i] and Wire.Outputs[i] there. The TF parser and writers
	// see only this signature; the v2 encoder and decoder see Wire.
	Wire *Signature
}

// OnWire returns the signature in the v2 server's names: Wire, or s
// itself when nothing is renamed.
func (s *Signature) OnWire() *Signature {
	if s == nil || s.Wire == nil {
		return s
	}
	return s.Wire
}

// Equal reports two signatures that translate alike: every field equal,
// the v2 names' signature (Wire) too. It lives beside the type so that a
// field added here is compared too.
func (s *Signature) Equal(o *Signature) bool {
	if s == o {
		return true
	}
	if s == nil || o == nil {
		return false
	}
	return s.Model == o.Model && s.Platform == o.Platform && s.Batched == o.Batched &&
		s.MaxBatchSize == o.MaxBatchSize && slices.Equal(s.Versions, o.Versions) &&
		equalSpecs(s.Inputs, o.Inputs) && equalSpecs(s.Outputs, o.Outputs) && s.Wire.Equal(o.Wire)
}

func equalSpecs(a, b []Spec) bool {
	return slices.EqualFunc(a, b, func(x, y Spec) bool {
		return x.Name == y.Name && x.DataType == y.DataType && slices.Equal(x.Shape, y.Shape)
	})
}

// Input returns the input spec named name.
func (s *Signature) Input(name string) (*Spec, bool) { return find(s.Inputs, name) }

// Output returns the output spec named name.
func (s *Signature) Output(name string) (*Spec, bool) { return find(s.Outputs, name) }

func find(specs []Spec, name string) (*Spec, bool) {
	for i := range specs {
		if specs[i].Name == name {
			return &specs[i], true
		}
	}
	return nil, false
}

// NameSet returns the n names name(0..n-1) sorted and without duplicates,
// as a std::set<string> holds them: the order in which TF's messages list
// tensor names.
func NameSet(n int, name func(int) string) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = name(i)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// SetDifference returns the names of sorted set a that are not in sorted
// set b, in order.
func SetDifference(a, b []string) []string {
	var out []string
	for _, s := range a {
		if _, found := slices.BinarySearch(b, s); !found {
			out = append(out, s)
		}
	}
	return out
}
