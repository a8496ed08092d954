package modelmap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// MaxFileBytes bounds a map file: a real map is a few KiB, and the file is
// re-read every few seconds.
const MaxFileBytes = 4 << 20

// Error is one problem in a map file, with the line it is on (0 when the
// problem has no single line, e.g. an unreadable file).
type Error struct {
	Line int
	Msg  string
}

// Error implements error: "line 7: unknown key "modle" in model "mnist"".
func (e *Error) Error() string {
	if e.Line <= 0 {
		return e.Msg
	}
	return "line " + strconv.Itoa(e.Line) + ": " + e.Msg
}

func errAt(n *yaml.Node, format string, args ...any) *Error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &Error{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// Load reads and parses the map file at path; errors name the file.
func Load(path string) (*Map, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	m, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// readFile reads at most MaxFileBytes of path.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model map: %w", err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxFileBytes+1)); err != nil {
		return nil, fmt.Errorf("model map %s: %w", path, err)
	}
	if buf.Len() > MaxFileBytes {
		return nil, fmt.Errorf("model map %s: larger than %d bytes", path, MaxFileBytes)
	}
	return buf.Bytes(), nil
}

// Parse parses and validates a map document. The error is an *Error
// naming the line of the first problem: YAML syntax, a key that is not
// part of the format, a duplicate key or name, a bad value, a server that
// is used but not defined, a label without a version, a rename or
// metadata that contradict each other.
func Parse(data []byte) (*Map, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, syntaxError(err)
	}
	m := &Map{Servers: map[string]*Server{}, Models: map[string]*Model{}}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return m, nil // an empty file maps nothing
	}
	root := doc.Content[0]
	if err := noAliases(root); err != nil {
		return nil, err
	}
	if isNull(root) {
		return m, nil
	}
	var modelsNode *yaml.Node
	err := fields(root, "the map", func(key string, k, v *yaml.Node) error {
		switch key {
		case "servers":
			return parseServers(m, v)
		case "models":
			modelsNode = v
			return nil
		}
		return errAt(k, "unknown key %q at the top level (want servers, models)", key)
	})
	if err != nil {
		return nil, err
	}
	if modelsNode != nil {
		if err := parseModels(m, modelsNode); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// syntaxError turns yaml's "yaml: line 3: ..." into an *Error.
func syntaxError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		return &Error{Msg: te.Errors[0]}
	}
	msg := err.Error()
	var line int
	if n, _ := fmt.Sscanf(msg, "yaml: line %d:", &line); n == 1 {
		_, rest, _ := bytes.Cut([]byte(msg), []byte(": "))
		_, rest, _ = bytes.Cut(rest, []byte(": "))
		if bytes.HasPrefix(rest, []byte("did not find expected")) {
			// yaml/v3 counts parser (not scanner) error lines from 0.
			line++
		}
		return &Error{Line: line, Msg: "invalid YAML: " + string(rest)}
	}
	return &Error{Msg: "invalid YAML: " + msg}
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// noAliases refuses YAML aliases anywhere in the document: the format
// has inheritance for what anchors would share, and an alias graph lets a
// small file expand into an enormous map.
func noAliases(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode {
		return errAt(n, "YAML aliases (*%s) are not supported in a model map", n.Value)
	}
	for _, c := range n.Content {
		if err := noAliases(c); err != nil {
			return err
		}
	}
	return nil
}

// fields walks a mapping node, refusing duplicate keys and non-string
// keys; what names the mapping in messages.
func fields(n *yaml.Node, what string, each func(key string, k, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return errAt(n, "%s must be a mapping, not %s", what, describe(n))
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
			return errAt(k, "%s: keys must be plain strings", what)
		}
		if seen[k.Value] {
			return errAt(k, "duplicate key %q in %s", k.Value, what)
		}
		seen[k.Value] = true
		if err := each(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "empty"
		}
		return strconv.Quote(n.Value)
	}
	return "that"
}

// str reads a non-empty string scalar.
func str(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode || isNull(n) || (n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float") {
		return "", errAt(n, "%s must be a string, not %s", what, describe(n))
	}
	if n.Value == "" {
		return "", errAt(n, "%s must not be empty", what)
	}
	return n.Value, nil
}

// integer reads an integer scalar.
func integer(n *yaml.Node, what string) (int64, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, errAt(n, "%s must be an integer, not %s", what, describe(n))
	}
	v, err := strconv.ParseInt(n.Value, 0, 64)
	if err != nil {
		return 0, errAt(n, "%s: %q is not a 64-bit integer", what, n.Value)
	}
	return v, nil
}

var kinds = []string{"auto", "triton", "kserve", "mlserver"}

func parseServers(m *Map, n *yaml.Node) error {
	if isNull(n) {
		return nil
	}
	return fields(n, "servers", func(name string, k, v *yaml.Node) error {
		if name == "" {
			return errAt(k, "a server name must not be empty")
		}
		if name == DefaultServer {
			return errAt(k, "server %q is --backend's and cannot be redefined", name)
		}
		s := &Server{Name: name, Kind: "auto"}
		what := fmt.Sprintf("server %q", name)
		err := fields(v, what, func(key string, kk, vv *yaml.Node) error {
			var err error
			switch key {
			case "url":
				if s.URL, err = str(vv, what+" url"); err != nil {
					return err
				}
				u, perr := url.Parse(s.URL)
				if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
					return errAt(vv, "%s url %q: want http://host:port or https://host:port", what, s.URL)
				}
			case "kind":
				if s.Kind, err = str(vv, what+" kind"); err != nil {
					return err
				}
				if !slices.Contains(kinds, s.Kind) {
					return errAt(vv, "%s kind %q: want auto, triton, kserve or mlserver", what, s.Kind)
				}
			case "bearer_token_file":
				s.BearerTokenFile, err = str(vv, what+" bearer_token_file")
			default:
				return errAt(kk, "unknown key %q in %s (want url, kind, bearer_token_file)", key, what)
			}
			return err
		})
		if err != nil {
			return err
		}
		if s.URL == "" {
			return errAt(k, "%s has no url", what)
		}
		m.Servers[name] = s
		return nil
	})
}

func parseModels(m *Map, n *yaml.Node) error {
	if isNull(n) {
		return nil
	}
	return fields(n, "models", func(name string, k, v *yaml.Node) error {
		if name == "" {
			return errAt(k, "a model name must not be empty")
		}
		mm, err := parseModel(m, name, k, v)
		if err != nil {
			return err
		}
		m.Models[name] = mm
		return nil
	})
}

func parseModel(m *Map, name string, k, v *yaml.Node) (*Model, error) {
	what := fmt.Sprintf("model %q", name)
	mm := &Model{Name: name, Server: DefaultServer, Default: &Signature{Name: DefaultSignature}}
	var sigsNode *yaml.Node
	if isNull(v) {
		// "mnist:" alone maps the model to itself: allowed, it is a no-op.
		mm.Default.Model = name
		return mm, nil
	}
	err := fields(v, what, func(key string, kk, vv *yaml.Node) error {
		var err error
		switch key {
		case "server":
			if mm.Server, err = str(vv, what+" server"); err != nil {
				return err
			}
			if mm.Server != DefaultServer && m.Servers[mm.Server] == nil {
				return errAt(vv, "%s uses server %q, which servers does not define", what, mm.Server)
			}
		case "labels":
			mm.Labels, err = parseLabels(vv, what)
		case "signatures":
			sigsNode = vv
		default:
			if ok, err := signatureField(mm.Default, key, vv, what); ok || err != nil {
				return err
			}
			return errAt(kk, "unknown key %q in %s (want server, model, labels, inputs, outputs, metadata, signatures)", key, what)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if mm.Default.Model == "" {
		mm.Default.Model = name
	}
	if err := checkSignature(mm.Default, v, what); err != nil {
		return nil, err
	}
	if sigsNode != nil && !isNull(sigsNode) {
		mm.Signatures = map[string]*Signature{}
		err := fields(sigsNode, what+" signatures", func(sname string, sk, sv *yaml.Node) error {
			if sname == "" {
				return errAt(sk, "%s: a signature name must not be empty", what)
			}
			if sname == DefaultSignature {
				return errAt(sk, "%s: signature %q is the model's top-level entry; set its fields there", what, sname)
			}
			s, err := parseSignature(mm.Default, sname, sv, fmt.Sprintf("signature %q of %s", sname, what))
			if err != nil {
				return err
			}
			mm.Signatures[sname] = s
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return mm, nil
}

func parseLabels(n *yaml.Node, what string) (map[string]int64, error) {
	labels := map[string]int64{}
	if isNull(n) {
		return labels, nil
	}
	err := fields(n, what+" labels", func(label string, k, v *yaml.Node) error {
		if label == "" {
			return errAt(k, "%s: a label must not be empty", what)
		}
		if isNull(v) {
			return errAt(k, "%s: label %q points nowhere: give it a version number", what, label)
		}
		ver, err := integer(v, fmt.Sprintf("%s label %q", what, label))
		if err != nil {
			return err
		}
		if ver < 0 {
			return errAt(v, "%s label %q: version %d is negative", what, label, ver)
		}
		labels[label] = ver
		return nil
	})
	return labels, err
}

// parseSignature parses one entry of signatures. Fields it leaves unset
// inherit from the model's top-level entry (def): the renames always (a
// rename of a tensor the v2 model lacks does nothing), the metadata only
// when the signature reaches the same v2 model.
func parseSignature(def *Signature, name string, n *yaml.Node, what string) (*Signature, error) {
	s := &Signature{Name: name}
	if !isNull(n) {
		err := fields(n, what, func(key string, k, v *yaml.Node) error {
			if ok, err := signatureField(s, key, v, what); ok || err != nil {
				return err
			}
			return errAt(k, "unknown key %q in %s (want model, inputs, outputs, metadata)", key, what)
		})
		if err != nil {
			return nil, err
		}
	}
	if s.Model == "" {
		s.Model = def.Model
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
	return s, checkSignature(s, n, what)
}

// signatureField parses one of the keys a signature may have; ok is false
// for any other key.
func signatureField(s *Signature, key string, v *yaml.Node, what string) (ok bool, err error) {
	switch key {
	case "model":
		s.Model, err = str(v, what+" model")
	case "inputs":
		s.Inputs, err = parseRenames(v, what+" inputs")
	case "outputs":
		s.Outputs, err = parseRenames(v, what+" outputs")
	case "metadata":
		s.Metadata, err = parseMetadata(v, what+" metadata")
	default:
		return false, nil
	}
	return true, err
}

// parseRenames reads {tf_name: v2_name}; two TF names may not reach the
// same v2 tensor.
func parseRenames(n *yaml.Node, what string) (map[string]string, error) {
	out := map[string]string{}
	if isNull(n) {
		return out, nil
	}
	target := map[string]string{}
	err := fields(n, what, func(tf string, k, v *yaml.Node) error {
		if tf == "" {
			return errAt(k, "%s: a tensor name must not be empty", what)
		}
		v2name, err := str(v, fmt.Sprintf("%s %q", what, tf))
		if err != nil {
			return err
		}
		if prev, dup := target[v2name]; dup {
			return errAt(v, "%s: %q and %q both rename to %q", what, prev, tf, v2name)
		}
		target[v2name] = tf
		out[tf] = v2name
		return nil
	})
	return out, err
}

func parseMetadata(n *yaml.Node, what string) (*Metadata, error) {
	md := &Metadata{}
	var haveInputs bool
	err := fields(n, what, func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "inputs":
			haveInputs = true
			md.Inputs, err = parseSpecs(v, what+" inputs")
		case "outputs":
			md.Outputs, err = parseSpecs(v, what+" outputs")
		default:
			return errAt(k, "unknown key %q in %s (want inputs, outputs)", key, what)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !haveInputs || len(md.Inputs) == 0 {
		return nil, errAt(n, "%s must list at least one input", what)
	}
	return md, nil
}

func parseSpecs(n *yaml.Node, what string) ([]tensor.Spec, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, errAt(n, "%s must be a list, not %s", what, describe(n))
	}
	specs := make([]tensor.Spec, 0, len(n.Content))
	seen := map[string]bool{}
	for _, item := range n.Content {
		var sp tensor.Spec
		var haveType, haveShape bool
		err := fields(item, what+" entry", func(key string, k, v *yaml.Node) error {
			var err error
			switch key {
			case "name":
				sp.Name, err = str(v, what+" name")
			case "datatype":
				var name string
				if name, err = str(v, what+" datatype"); err != nil {
					return err
				}
				var ok bool
				if sp.DataType, ok = tensor.ParseV2(name); !ok {
					return errAt(v, "%s: unknown datatype %q (want a v2 datatype such as FP32, INT64, BYTES)", what, name)
				}
				haveType = true
			case "shape":
				haveShape = true
				sp.Shape, err = parseShape(v, what+" shape")
			default:
				return errAt(k, "unknown key %q in %s entry (want name, datatype, shape)", key, what)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		switch {
		case sp.Name == "":
			return nil, errAt(item, "%s entry has no name", what)
		case !haveType:
			return nil, errAt(item, "%s entry %q has no datatype", what, sp.Name)
		case !haveShape:
			return nil, errAt(item, "%s entry %q has no shape", what, sp.Name)
		case seen[sp.Name]:
			return nil, errAt(item, "%s: duplicate tensor name %q", what, sp.Name)
		}
		seen[sp.Name] = true
		specs = append(specs, sp)
	}
	return specs, nil
}

func parseShape(n *yaml.Node, what string) ([]int64, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, errAt(n, "%s must be a list of dimensions, not %s", what, describe(n))
	}
	shape := make([]int64, 0, len(n.Content))
	for _, d := range n.Content {
		v, err := integer(d, what+" dimension")
		if err != nil {
			return nil, err
		}
		if v < -1 || v > math.MaxInt32 {
			return nil, errAt(d, "%s: dimension %d must be -1 (variable) or a size", what, v)
		}
		shape = append(shape, v)
	}
	return shape, nil
}

// checkSignature cross-checks renames against explicit metadata: a rename
// to a v2 tensor the metadata does not declare is a mistake the file can
// show, instead of a request failing later.
func checkSignature(s *Signature, n *yaml.Node, what string) error {
	if s.Metadata == nil {
		return nil
	}
	for _, tf := range sortedKeys(s.Inputs) {
		if !hasSpec(s.Metadata.Inputs, s.Inputs[tf]) {
			return errAt(n, "%s renames input %q to %q, which its metadata does not declare", what, tf, s.Inputs[tf])
		}
	}
	for _, tf := range sortedKeys(s.Outputs) {
		if !hasSpec(s.Metadata.Outputs, s.Outputs[tf]) {
			return errAt(n, "%s renames output %q to %q, which its metadata does not declare", what, tf, s.Outputs[tf])
		}
	}
	return nil
}

func hasSpec(specs []tensor.Spec, name string) bool {
	return slices.ContainsFunc(specs, func(s tensor.Spec) bool { return s.Name == name })
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
