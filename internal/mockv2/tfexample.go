package mockv2

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// The mock's own tf.Example reader, written against
// tensorflow/core/example/{example,feature}.proto with protowire and
// nothing of translate/: the classify and regress models really parse what
// tfsbridge serialized, so a bug in its writer shows up here.

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
	err := walkFields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 1 || typ != protowire.BytesType { // Example.features
			return nil
		}
		return walkFields(v, func(num protowire.Number, typ protowire.Type, entry []byte, _ uint64) error {
			if num != 1 || typ != protowire.BytesType { // Features.feature
				return nil
			}
			return parseEntry(entry, feats)
		})
	})
	return feats, err
}

// parseEntry decodes one map<string, Feature> entry.
func parseEntry(entry []byte, feats map[string]*exFeature) error {
	var key string
	f := &exFeature{}
	err := walkFields(entry, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			key = string(v)
		case num == 2 && typ == protowire.BytesType:
			return parseFeature(v, f)
		}
		return nil
	})
	feats[key] = f
	return err
}

func parseFeature(b []byte, f *exFeature) error {
	return walkFields(b, func(num protowire.Number, typ protowire.Type, list []byte, _ uint64) error {
		if num < 1 || num > 3 || typ != protowire.BytesType {
			return nil
		}
		if f.kind != num {
			*f = exFeature{kind: num}
		}
		return walkFields(list, func(n protowire.Number, typ protowire.Type, v []byte, x uint64) error {
			if n != 1 {
				return nil
			}
			switch {
			case num == 1 && typ == protowire.BytesType:
				f.bytes = append(f.bytes, v)
			case num == 2 && typ == protowire.Fixed32Type:
				f.floats = append(f.floats, math.Float32frombits(uint32(x)))
			case num == 2 && typ == protowire.BytesType: // packed
				for len(v) > 0 {
					u, m := protowire.ConsumeFixed32(v)
					if m < 0 {
						return errExample
					}
					f.floats, v = append(f.floats, math.Float32frombits(u)), v[m:]
				}
			case num == 3 && typ == protowire.VarintType:
				f.ints = append(f.ints, int64(x))
			case num == 3 && typ == protowire.BytesType: // packed
				for len(v) > 0 {
					u, m := protowire.ConsumeVarint(v)
					if m < 0 {
						return errExample
					}
					f.ints, v = append(f.ints, int64(u)), v[m:]
				}
			default:
				return errExample
			}
			return nil
		})
	})
}

// walkFields calls fn for every field of a message: its number, wire type,
// and its bytes (length-delimited) or value (varint, fixed).
func walkFields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errExample
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var u uint32
			u, n = protowire.ConsumeFixed32(b)
			x = uint64(u)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errExample
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
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
