package mockv2

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/internal/pbwire"
)

// The mock's own tf.Example reader, written against
// tensorflow/core/example/{example,feature}.proto over the generic wire walk
// of internal/pbwire and nothing of translate/: the classify and regress
// models really parse what tfsbridge serialized, so a bug in its writer shows
// up here.

// exFeature is one decoded Feature: the last oneof case set wins, a case
// repeated merges (its values append), as protobuf parsing does.
type exFeature struct {
	kind   protowire.Number // 1 bytes_list, 2 float_list, 3 int64_list, 0 none
	bytes  [][]byte
	floats []float32
	ints   []int64
}

var errExample = errors.New("malformed tf.Example")

// parseExample decodes one serialized tf.Example into its features. The
// bytes may be several serializations back to back (a context then an
// example): protobuf reads that as their merge, a later map entry
// replacing an earlier one of the same name.
func parseExample(b []byte) (map[string]*exFeature, error) {
	feats := map[string]*exFeature{}
	err := pbwire.Walk(b, func(ex *pbwire.Field) error {
		if ex.Num != 1 || ex.Typ != protowire.BytesType { // Example.features
			return nil
		}
		return pbwire.Walk(ex.V, func(fs *pbwire.Field) error {
			if fs.Num != 1 || fs.Typ != protowire.BytesType { // Features.feature
				return nil
			}
			return parseEntry(fs.V, feats)
		})
	})
	if errors.Is(err, pbwire.ErrMalformed) {
		err = errExample
	}
	return feats, err
}

// parseEntry decodes one map<string, Feature> entry.
func parseEntry(entry []byte, feats map[string]*exFeature) error {
	var key string
	f := &exFeature{}
	err := pbwire.Walk(entry, func(e *pbwire.Field) error {
		switch {
		case e.Num == 1 && e.Typ == protowire.BytesType:
			key = string(e.V)
		case e.Num == 2 && e.Typ == protowire.BytesType:
			return parseFeature(e.V, f)
		}
		return nil
	})
	feats[key] = f
	return err
}

func parseFeature(b []byte, f *exFeature) error {
	return pbwire.Walk(b, func(kind *pbwire.Field) error {
		num := kind.Num
		if num < 1 || num > 3 || kind.Typ != protowire.BytesType {
			return nil
		}
		if f.kind != num {
			*f = exFeature{kind: num}
		}
		return pbwire.Walk(kind.V, func(v *pbwire.Field) error {
			if v.Num != 1 {
				return nil
			}
			switch {
			case num == 1 && v.Typ == protowire.BytesType:
				f.bytes = append(f.bytes, v.V)
			case num == 2 && (v.Typ == protowire.Fixed32Type || v.Typ == protowire.BytesType):
				return pbwire.Scalars(v, pbwire.Fixed32, func(u uint64) { f.floats = append(f.floats, math.Float32frombits(uint32(u))) })
			case num == 3 && (v.Typ == protowire.VarintType || v.Typ == protowire.BytesType):
				return pbwire.Scalars(v, pbwire.Varint, func(u uint64) { f.ints = append(f.ints, int64(u)) })
			default:
				return errExample
			}
			return nil
		})
	})
}

// number returns the first value of a float or int64 feature.
func (f *exFeature) number() (float32, bool) {
	switch {
	case f == nil:
	case len(f.floats) > 0:
		return f.floats[0], true
	case len(f.ints) > 0:
		return float32(f.ints[0]), true
	}
	return 0, false
}

// exampleNumber is feature name of example i as a number, def when absent
// (a required feature passes no default: absent is an error).
func exampleNumber(feats map[string]*exFeature, i int, name string, def *float32) (float32, error) {
	if v, ok := feats[name].number(); ok {
		return v, nil
	}
	if def != nil {
		return *def, nil
	}
	return 0, fmt.Errorf("example %d has no numeric feature '%s'", i, name)
}
