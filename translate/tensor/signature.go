package tensor

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
