package modelmap

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// The raw* types are the file format as the YAML decoder reads it, with
// unknown keys, duplicate keys and wrong scalar types refused there.
// Pointers tell "absent" (or empty: "mnist:") from an empty value.

type rawMap struct {
	Servers map[string]*rawServer `yaml:"servers"`
	Models  map[string]*rawModel  `yaml:"models"`
}

type rawServer struct {
	URL             string `yaml:"url"`
	Kind            string `yaml:"kind"`
	BearerTokenFile string `yaml:"bearer_token_file"`
	GRPC            string `yaml:"grpc"`
}

type rawModel struct {
	Server       *string             `yaml:"server"`
	Split        map[string]*integer `yaml:"split"`
	SplitKey     *string             `yaml:"split_key"`
	Labels       map[string]*integer `yaml:"labels"`
	rawSignature `yaml:",inline"`
	Signatures   map[string]*rawSignature `yaml:"signatures"`
	Shadow       *rawShadow               `yaml:"shadow"`
}

type rawSignature struct {
	Model    *string           `yaml:"model"`
	Inputs   map[string]string `yaml:"inputs"`
	Outputs  map[string]string `yaml:"outputs"`
	Metadata *rawMetadata      `yaml:"metadata"`
}

type rawMetadata struct {
	Inputs  []rawSpec `yaml:"inputs"`
	Outputs []rawSpec `yaml:"outputs"`
}

type rawSpec struct {
	Name     string     `yaml:"name"`
	DataType string     `yaml:"datatype"`
	Shape    *[]integer `yaml:"shape"`
}

// integer is a YAML integer and nothing else: the decoder would turn
// 1.5 into 1 for an int64.
type integer int64

// UnmarshalYAML implements yaml.Unmarshaler, with the decoder's own
// message for a value of the wrong type.
func (i *integer) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		if v, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
			*i = integer(v)
			return nil
		}
	}
	value := ""
	if n.Kind == yaml.ScalarNode {
		value = " `" + n.Value + "`"
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal %s%s into modelmap.integer", n.Line, n.ShortTag(), value)}}
}

var kinds = []string{"auto", "triton", "kserve", "mlserver", KindV2, KindTFServing}

// problem is one thing validate refuses, at a field path.
type problem struct {
	path path
	msg  string
}

// validator collects the problems of one map.
type validator struct{ problems []problem }

func (v *validator) add(p path, format string, args ...any) {
	v.problems = append(v.problems, problem{p, fmt.Sprintf(format, args...)})
}

// validate is the one pass over a decoded map: it checks what the types
// cannot say and builds the Map.
func validate(raw *rawMap) (*Map, []problem) {
	var v validator
	m := &Map{Servers: map[string]*Server{}, Models: map[string]*Model{}}
	for name, rs := range raw.Servers {
		if s := v.server(keyPath("servers", name), name, rs); s != nil {
			m.Servers[name] = s
		}
	}
	for name, rm := range raw.Models {
		mm := v.model(keyPath("models", name), name, rm, raw.Servers)
		m.Models[name] = mm
		if mm.Split != nil && mm.Split.Key != "" && !slices.Contains(m.SplitKeys, mm.Split.Key) {
			m.SplitKeys = append(m.SplitKeys, mm.Split.Key)
		}
	}
	slices.Sort(m.SplitKeys)
	return m, v.problems
}

func (v *validator) server(p path, name string, rs *rawServer) *Server {
	switch {
	case name == "":
		v.add(p, "a server name must not be empty")
	case name == DefaultServer:
		v.add(p, "server %q is --backend's and cannot be redefined", name)
	case rs == nil || rs.URL == "":
		v.add(p, "server %q has no url", name)
	default:
		s := &Server{Name: name, URL: rs.URL, Kind: rs.Kind, BearerTokenFile: rs.BearerTokenFile, GRPC: rs.GRPC}
		if s.GRPC != "" {
			if _, port, err := net.SplitHostPort(s.GRPC); err != nil || port == "" {
				v.add(p.key("grpc"), "%q: want host:port (the server's gRPC address)", s.GRPC)
			}
		}
		if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			v.add(p.key("url"), "%q: want http://host:port or https://host:port", s.URL)
		}
		if s.Kind == "" || s.Kind == KindV2 {
			s.Kind = "auto"
		}
		if !slices.Contains(kinds, s.Kind) {
			v.add(p.key("kind"), "kind %q: want v2 (or auto), triton, kserve, mlserver or tfserving", s.Kind)
		}
		return s
	}
	return nil
}

func (v *validator) model(p path, name string, rm *rawModel, servers map[string]*rawServer) *Model {
	if name == "" {
		v.add(p, "a model name must not be empty")
	}
	if rm == nil {
		rm = &rawModel{} // "mnist:" alone maps the model to itself: a no-op
	}
	mm := &Model{Name: name, Server: DefaultServer}
	if rm.Server != nil {
		mm.Server = *rm.Server
		if _, ok := servers[mm.Server]; !ok && mm.Server != DefaultServer {
			v.add(p.key("server"), "uses server %q, which servers does not define", mm.Server)
		}
	}
	v.split(p, mm, rm, servers)
	if rm.Labels != nil {
		mm.Labels = make(map[string]int64, len(rm.Labels))
	}
	for label, ver := range rm.Labels {
		lp := p.keys("labels", label)
		switch {
		case label == "":
			v.add(lp, "a label must not be empty")
		case ver == nil:
			v.add(lp, "label %q points nowhere: give it a version number", label)
		case *ver < 0:
			v.add(lp, "label %q: version %d is negative", label, *ver)
		default:
			mm.Labels[label] = int64(*ver)
		}
	}
	mm.Default = v.signature(p, DefaultSignature, &rm.rawSignature, &Signature{Model: name})
	mm.Shadow = v.shadow(p.key("shadow"), rm.Shadow, servers)
	if rm.Signatures != nil {
		mm.Signatures = make(map[string]*Signature, len(rm.Signatures))
	}
	for sname, rs := range rm.Signatures {
		sp := p.keys("signatures", sname)
		switch sname {
		case "":
			v.add(sp, "a signature name must not be empty")
		case DefaultSignature:
			v.add(sp, "signature %q is the model's top-level entry; set its fields there", sname)
		}
		if rs == nil {
			rs = &rawSignature{}
		}
		mm.Signatures[sname] = v.signature(sp, sname, rs, mm.Default)
	}
	v.tfservingOnly(p, mm, rm, servers)
	return mm
}

// signature builds one signature. Fields it leaves unset inherit from
// def (the model's top-level entry, or for that entry the model's own
// name): the v2 model and the renames always (a rename of a tensor the
// v2 model lacks does nothing), the metadata only when the signature
// reaches the same v2 model.
func (v *validator) signature(p path, name string, rs *rawSignature, def *Signature) *Signature {
	s := &Signature{Name: name, Model: def.Model, Inputs: rs.Inputs, Outputs: rs.Outputs}
	if rs.Model != nil {
		if s.Model = *rs.Model; s.Model == "" {
			v.add(p.key("model"), "the v2 model name must not be empty")
			s.Model = def.Model
		}
	}
	v.renames(p.key("inputs"), rs.Inputs)
	v.renames(p.key("outputs"), rs.Outputs)
	if rs.Metadata != nil {
		s.Metadata = v.metadata(p.key("metadata"), rs.Metadata)
	}
	if s.Inputs == nil {
		s.Inputs = def.Inputs
	}
	if s.Outputs == nil {
		s.Outputs = def.Outputs
	}
	if s.Metadata == nil && s.Model == def.Model {
		s.Metadata = def.Metadata
	}
	// A rename to a v2 tensor the explicit metadata does not declare is
	// a mistake the file can show, instead of a request failing later.
	if s.Metadata != nil {
		for _, side := range []struct {
			what    string
			renames map[string]string
			specs   []tensor.Spec
		}{{"inputs", s.Inputs, s.Metadata.Inputs}, {"outputs", s.Outputs, s.Metadata.Outputs}} {
			for _, tf := range sortedKeys(side.renames) {
				if !slices.ContainsFunc(side.specs, func(sp tensor.Spec) bool { return sp.Name == side.renames[tf] }) {
					v.add(p.keys(side.what, tf), "renames %q to %q, which the metadata's %s do not declare", tf, side.renames[tf], side.what)
				}
			}
		}
	}
	return s
}

// renames checks {tf_name: v2_name}: names are not empty and no two TF
// names reach the same v2 tensor.
func (v *validator) renames(p path, renames map[string]string) {
	target := map[string]string{}
	for _, tf := range sortedKeys(renames) {
		v2 := renames[tf]
		switch {
		case tf == "":
			v.add(p.key(tf), "a tensor name must not be empty")
		case v2 == "":
			v.add(p.key(tf), "%q renames to nothing: give the v2 tensor name", tf)
		case target[v2] != "":
			v.add(p.key(tf), "%q and %q both rename to %q", target[v2], tf, v2)
		default:
			target[v2] = tf
		}
	}
}

func (v *validator) metadata(p path, rm *rawMetadata) *Metadata {
	if len(rm.Inputs) == 0 {
		v.add(p, "metadata must list at least one input")
	}
	return &Metadata{Inputs: v.specs(p.key("inputs"), rm.Inputs), Outputs: v.specs(p.key("outputs"), rm.Outputs)}
}

func (v *validator) specs(p path, raw []rawSpec) []tensor.Spec {
	if raw == nil {
		return nil
	}
	specs := make([]tensor.Spec, 0, len(raw))
	seen := map[string]bool{}
	for i, rs := range raw {
		ip := p.index(i)
		sp := tensor.Spec{Name: rs.Name}
		var ok bool
		switch {
		case rs.Name == "":
			v.add(ip, "the tensor has no name")
		case seen[rs.Name]:
			v.add(ip, "duplicate tensor name %q", rs.Name)
		case rs.DataType == "":
			v.add(ip, "tensor %q has no datatype", rs.Name)
		case rs.Shape == nil:
			v.add(ip, "tensor %q has no shape", rs.Name)
		}
		seen[rs.Name] = true
		if sp.DataType, ok = tensor.ParseV2(rs.DataType); !ok && rs.DataType != "" {
			v.add(ip.key("datatype"), "unknown datatype %q (want a v2 datatype such as FP32, INT64, BYTES)", rs.DataType)
		}
		if rs.Shape != nil {
			sp.Shape = make([]int64, len(*rs.Shape))
			for j, d := range *rs.Shape {
				if d < -1 || d > math.MaxInt32 {
					v.add(ip.keys("shape").index(j), "dimension %d must be -1 (variable) or a size", d)
				}
				sp.Shape[j] = int64(d)
			}
		}
		specs = append(specs, sp)
	}
	return specs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
