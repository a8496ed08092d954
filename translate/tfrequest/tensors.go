package tfrequest

import (
	"strconv"
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// input accumulates one signature input's tensor.
type input struct {
	spec   *tensor.Spec
	buf    *[]byte // pooled buffer behind data
	data   []byte
	blocks [][]byte // streaming: the full blocks before data (blocks.go)
	strs   [][]byte
	used   bool    // a tensor exists for it (TF's tensor_map entry)
	seen   bool    // row format: size and shape of the first item recorded
	size   int64   // values per item (row) or in the tensor (columnar)
	shape  []int64 // item shape (row) or tensor shape (columnar)
	inObj  bool    // named in the current instance object
}

// wrapElement is the row-format wrapping of an inner status:
// "Failed to process element: <i> [key: <k> ]of 'instances' list. Error:
// <CODE>: <msg>" (absl::Status::ToString of the inner error), built by one
// concatenation, one allocation: the key and the message may be a MiB long.
func wrapElement(i int, key []byte, err error) error {
	inner := apierr.As(err)
	sep := ""
	if key != nil {
		sep = " key: "
	}
	return apierr.Wrap(apierr.InvalidArgument, err, "Failed to process element: "+strconv.Itoa(i)+sep+string(key)+
		" of 'instances' list. Error: "+inner.Code.String()+": "+inner.Msg)
}

// sortedNames joins the input names as TF's std::set<string> orders them.
func sortedNames(n int, name func(int) string) string {
	return strings.Join(tensor.NameSet(n, name), ",")
}

// buildTensors is the last step of the decoder (and of the tests' tape
// oracle): the n inputs' values become r.Inputs in signature order,
// skipping inputs the body did not fill, row format with the batch
// dimension first. A duplicated instance key leaves more values than the
// shape holds: the first ones are kept, as TF's Tensor::FromProto does.
// ensureBuf gives a numeric input without values its (empty) buffer.
func buildTensors(r *Request, n int, at func(int) *input, batch int64, ensureBuf func(*input)) {
	nShape := 0
	for i := range n {
		if at(i).used {
			nShape += len(at(i).shape) + 1
		}
	}
	r.shape = make([]int64, 0, nShape)
	r.Inputs = make([]tensor.Tensor, 0, n)
	for i := range n {
		in := at(i)
		if !in.used {
			continue
		}
		start := len(r.shape)
		n := in.size
		if r.Format == tfjson.Row {
			r.shape = append(r.shape, batch)
			n *= batch
		}
		r.shape = append(r.shape, in.shape...)
		t := tensor.Tensor{Name: in.spec.Name, DataType: in.spec.DataType, Shape: r.shape[start:len(r.shape):len(r.shape)]}
		switch {
		case t.DataType == tensor.Bytes:
			t.Strings = in.strs[:n:n]
		case in.blocks != nil:
			r.setBlocks(&t, in, n*int64(t.DataType.Size()))
		default:
			ensureBuf(in)
			if cap(in.data) > cap(*in.buf) {
				*in.buf = in.data // outgrew the pooled buffer: pool the larger one
			}
			sz := int64(t.DataType.Size())
			t.Data = in.data[: n*sz : n*sz]
		}
		r.Inputs = append(r.Inputs, t)
	}
}
