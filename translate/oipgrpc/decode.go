package oipgrpc

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/internal/pbwire"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Message is a decoded ModelInferRequest or ModelInferResponse: its head
// and tensors. Fixed-size data from raw contents and BYTES elements alias
// the message; typed contents are converted into fresh little-endian
// bytes.
type Message struct {
	Head
	Tensors []tensor.Tensor
	// Outputs are a request's requested output names.
	Outputs []string
}

// DecodeInferResponse decodes a ModelInferResponse. Every output's data
// comes from raw_output_contents when there is one entry per output, else
// from its typed contents. Element counts are checked against
// lim.MaxElements and sizes against the bytes that arrived before
// anything is allocated. Errors are *apierr.Error with code BadGateway.
func DecodeInferResponse(msg []byte, lim tensor.Limits) (*Message, error) {
	return decodeInfer(msg, false, lim)
}

// DecodeInferRequest decodes a ModelInferRequest as DecodeInferResponse
// decodes a response (for tests and the mock server).
func DecodeInferRequest(msg []byte, lim tensor.Limits) (*Message, error) {
	return decodeInfer(msg, true, lim)
}

func decodeInfer(msg []byte, request bool, lim tensor.Limits) (*Message, error) {
	what := "ModelInferResponse"
	rawNum := fRespRaw
	if request {
		what, rawNum = "ModelInferRequest", fReqRaw
	}
	lim = lim.OrDefault()
	m := &Message{}
	var tensors, raw [][]byte
	err := walk(msg, func(f *field) error {
		if f.Typ != protowire.BytesType {
			return nil
		}
		var err error
		switch {
		case f.Num == fModelName:
			m.ModelName, err = str(f.V)
		case f.Num == fModelVersion:
			m.ModelVersion, err = str(f.V)
		case f.Num == fID:
			m.ID, err = str(f.V)
		case f.Num == fTensors:
			tensors = append(tensors, f.V)
		case f.Num == rawNum:
			raw = append(raw, f.V)
		case f.Num == fParameters:
			err = checkParameters(f.V)
		case request && f.Num == fReqOutputs:
			var name string
			err = walk(f.V, func(f *field) error {
				switch {
				case f.Num == fOutputName && f.Typ == protowire.BytesType:
					var err error
					name, err = str(f.V)
					return err
				case f.Num == fOutputParameters && f.Typ == protowire.BytesType:
					return checkParameters(f.V)
				}
				return nil
			})
			m.Outputs = append(m.Outputs, name)
		}
		return err
	})
	if err != nil {
		return nil, bad(what, err, "%v", err)
	}
	useRaw := len(raw) > 0
	if useRaw && len(raw) != len(tensors) {
		return nil, bad(what, nil, "%d raw contents for %d tensors", len(raw), len(tensors))
	}
	m.Tensors = make([]tensor.Tensor, len(tensors))
	total := int64(0)
	seen := make(map[string]struct{}, len(tensors))
	for i, tb := range tensors {
		t := &m.Tensors[i]
		var contents []byte
		var dtName string
		err := walk(tb, func(f *field) error {
			var err error
			switch {
			case f.Num == fTensorName && f.Typ == protowire.BytesType:
				t.Name, err = str(f.V)
			case f.Num == fTensorDatatype && f.Typ == protowire.BytesType:
				dtName, err = str(f.V)
			case f.Num == fTensorShape && (f.Typ == protowire.VarintType || f.Typ == protowire.BytesType):
				t.Shape, err = appendInt64s(t.Shape, f)
			case f.Num == fTensorParameters && f.Typ == protowire.BytesType:
				return checkParameters(f.V)
			case f.Num == fTensorContents && f.Typ == protowire.BytesType:
				// Occurrences merge: their concatenation, each checked
				// on its own (a concatenation can hide a bad boundary).
				if err := checkContents(f.V); err != nil {
					return err
				}
				contents = append(contents, f.V...)
			}
			return err
		})
		if err != nil {
			return nil, bad(what, err, "%v", err)
		}
		if _, dup := seen[t.Name]; dup {
			return nil, bad(what, nil, "duplicate tensor %q", t.Name)
		}
		seen[t.Name] = struct{}{}
		dt, ok := tensor.ParseV2(dtName)
		if !ok {
			return nil, bad(what, nil, "tensor %q has unknown datatype %q", t.Name, dtName)
		}
		t.DataType = dt
		n, err := tensor.NumElements(t.Shape)
		if err != nil {
			return nil, bad(what, err, "tensor %q: %v", t.Name, err)
		}
		if total += n; n > lim.MaxElements || total > lim.MaxElements {
			return nil, bad(what, nil, "more than %d elements", lim.MaxElements)
		}
		if useRaw {
			err = fromRaw(t, raw[i], n)
		} else {
			err = fromContents(t, contents, n)
		}
		if err != nil {
			return nil, bad(what, nil, "tensor %q: %v", t.Name, err)
		}
	}
	return m, nil
}

type sizeError struct {
	what      string
	want, got int64
}

func (e *sizeError) Error() string {
	return fmt.Sprintf("%s: want %d, have %d", e.what, e.want, e.got)
}

// fromRaw sets t's data from its raw contents: exactly n elements.
func fromRaw(t *tensor.Tensor, raw []byte, n int64) error {
	if t.DataType != tensor.Bytes {
		if want := n * int64(t.DataType.Size()); int64(len(raw)) != want {
			return &sizeError{"raw contents bytes", want, int64(len(raw))}
		}
		t.Data = raw
		return nil
	}
	// Each element takes at least its 4-byte length.
	if int64(len(raw)) < 4*n {
		return &sizeError{"raw BYTES contents bytes at least", 4 * n, int64(len(raw))}
	}
	t.Strings = make([][]byte, n)
	for i := range t.Strings {
		if len(raw) < 4 {
			return &sizeError{"raw BYTES elements", n, int64(i)}
		}
		l := binary.LittleEndian.Uint32(raw)
		raw = raw[4:]
		if uint64(l) > uint64(len(raw)) {
			return &sizeError{"raw BYTES element bytes", int64(l), int64(len(raw))}
		}
		t.Strings[i] = raw[:l:l]
		raw = raw[l:]
	}
	if len(raw) != 0 {
		return &sizeError{"raw BYTES trailing bytes", 0, int64(len(raw))}
	}
	return nil
}

// fromContents sets t's data from its typed contents: exactly n values
// of the datatype's field; FP16 and BF16 from bytes_contents, as one
// element of all the bytes or one per value (MLServer).
func fromContents(t *tensor.Tensor, contents []byte, n int64) error {
	num := contentsField(t.DataType)
	var vals [][]byte // bytes_contents elements
	var count int64
	var packed []uint64
	err := walk(contents, func(f *field) error {
		if f.Num != num {
			return nil
		}
		if num == fBytesContents {
			if f.Typ == protowire.BytesType {
				vals = append(vals, f.V)
				count++
			}
			return nil
		}
		var err error
		packed, err = pbwire.AppendScalars(packed, f, contentsWidth(num), int(n))
		count = int64(len(packed))
		if errors.Is(err, pbwire.ErrTooMany) {
			return &sizeError{"typed contents values", n, count + 1}
		}
		return err
	})
	if err != nil {
		return err
	}
	switch t.DataType {
	case tensor.Bytes:
		if count != n {
			return &sizeError{"bytes_contents elements", n, count}
		}
		t.Strings = vals
		return nil
	case tensor.FP16, tensor.BF16:
		var data []byte
		for _, v := range vals {
			data = append(data, v...)
		}
		if int64(len(data)) != 2*n {
			return &sizeError{"bytes_contents bytes", 2 * n, int64(len(data))}
		}
		t.Data = data
		return nil
	}
	if count != n {
		return &sizeError{"typed contents values", n, count}
	}
	size := t.DataType.Size()
	data := make([]byte, 0, int(n)*size)
	for _, u := range packed {
		switch size {
		case 1:
			if t.DataType == tensor.Bool && u != 0 {
				u = 1
			}
			data = append(data, byte(u))
		case 2:
			data = binary.LittleEndian.AppendUint16(data, uint16(u))
		case 4:
			data = binary.LittleEndian.AppendUint32(data, uint32(u))
		default:
			data = binary.LittleEndian.AppendUint64(data, u)
		}
	}
	t.Data = data
	return nil
}
