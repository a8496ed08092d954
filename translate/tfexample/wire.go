package tfexample

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of tensorflow/core/example/{example,feature}.proto.
const (
	fieldExampleFeatures  = 1 // Example.features
	fieldFeaturesFeature  = 1 // Features.feature (map<string, Feature>)
	fieldMapKey           = 1 // map entry key
	fieldMapValue         = 2 // map entry value
	fieldFeatureBytesList = 1 // Feature.bytes_list
	fieldFeatureFloatList = 2 // Feature.float_list
	fieldFeatureInt64List = 3 // Feature.int64_list
	fieldListValue        = 1 // BytesList/FloatList/Int64List.value
)

// sizeField is the size of a length-delimited field holding n bytes
// (every field number used here fits one tag byte).
func sizeField(n int) int { return protowire.SizeTag(1) + protowire.SizeBytes(n) }

// appendLen appends the tag and length of a length-delimited field whose
// n bytes the caller appends next.
func appendLen(b []byte, num, n int) []byte {
	b = protowire.AppendTag(b, protowire.Number(num), protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

// appendBytes appends a whole length-delimited field.
func appendBytes(b []byte, num int, v []byte) []byte {
	b = protowire.AppendTag(b, protowire.Number(num), protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// appendVarint appends one element of a packed int64 list.
func appendVarint(b []byte, v uint64) []byte { return protowire.AppendVarint(b, v) }

// appendFloat appends one element of a packed float list.
func appendFloat(b []byte, f float32) []byte {
	return protowire.AppendFixed32(b, math.Float32bits(f))
}
