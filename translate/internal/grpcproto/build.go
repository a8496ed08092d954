package grpcproto

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Field returns m's field named name.
func Field(m protoreflect.Message, name string) protoreflect.FieldDescriptor {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("grpcproto: no field " + name + " in " + string(m.Descriptor().FullName()))
	}
	return fd
}

// Get returns m's field named name.
func Get(m protoreflect.Message, name string) protoreflect.Value { return m.Get(Field(m, name)) }

// Append appends values to m's repeated field named name.
func Append(m protoreflect.Message, name string, vs ...protoreflect.Value) {
	l := m.Mutable(Field(m, name)).List()
	for _, v := range vs {
		l.Append(v)
	}
}

// TensorProto builds a tensorflow.TensorProto with dtype and dims; fill,
// when set, adds the values.
func TensorProto(dtype int32, dims []int64, fill func(m protoreflect.Message)) *dynamicpb.Message {
	m := New("tensorflow.TensorProto")
	m.Set(Field(m, "dtype"), protoreflect.ValueOfInt32(dtype))
	shape := m.Mutable(Field(m, "tensor_shape")).Message()
	for _, d := range dims {
		l := shape.Mutable(Field(shape, "dim")).List()
		dm := l.NewElement().Message()
		dm.Set(Field(dm, "size"), protoreflect.ValueOfInt64(d))
		l.Append(protoreflect.ValueOfMessage(dm))
	}
	if fill != nil {
		fill(m)
	}
	return m
}

// Values returns a fill function appending vs to the field named name.
func Values(name string, vs ...protoreflect.Value) func(protoreflect.Message) {
	return func(m protoreflect.Message) { Append(m, name, vs...) }
}

// Content returns a fill function setting tensor_content.
func Content(b []byte) func(protoreflect.Message) {
	return func(m protoreflect.Message) { m.Set(Field(m, "tensor_content"), protoreflect.ValueOfBytes(b)) }
}

// Spec is a ModelSpec to build: Version is set when non-nil.
type Spec struct {
	Name      string
	Version   *int64
	Label     string
	Signature string
}

// ModelSpec sets m's model_spec field.
func ModelSpec(m protoreflect.Message, s Spec) {
	ms := m.Mutable(Field(m, "model_spec")).Message()
	ms.Set(Field(ms, "name"), protoreflect.ValueOfString(s.Name))
	if s.Version != nil {
		v := ms.Mutable(Field(ms, "version")).Message()
		v.Set(v.Descriptor().Fields().ByName("value"), protoreflect.ValueOfInt64(*s.Version))
	}
	if s.Label != "" {
		ms.Set(Field(ms, "version_label"), protoreflect.ValueOfString(s.Label))
	}
	if s.Signature != "" {
		ms.Set(Field(ms, "signature_name"), protoreflect.ValueOfString(s.Signature))
	}
}

// PredictRequest builds a serialized PredictRequest; spec nil leaves
// model_spec out.
func PredictRequest(spec *Spec, inputs map[string]*dynamicpb.Message, filter ...string) []byte {
	m := New("tensorflow.serving.PredictRequest")
	if spec != nil {
		ModelSpec(m, *spec)
	}
	mp := m.Mutable(Field(m, "inputs")).Map()
	for k, v := range inputs {
		mp.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfMessage(v))
	}
	for _, f := range filter {
		Append(m, "output_filter", protoreflect.ValueOfString(f))
	}
	return Marshal(m)
}

// Marshal serializes m deterministically (map entries sorted).
func Marshal(m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}
