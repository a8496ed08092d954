package modelmap

import (
	"bytes"
	"errors"
	"io"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/tfsbridge/tfsbridge/internal/fileread"
)

// MaxFileBytes bounds a map file: a real map is a few KiB, and the file is
// re-read every few seconds.
const MaxFileBytes = 4 << 20

// Error is one problem in a map file: the line it is on (0 when the
// problem has no single line, e.g. an unreadable file), the field path
// it concerns ("models.mnist.labels.stable"; empty for YAML syntax) and
// what is wrong.
type Error struct {
	Line int
	Path string
	Msg  string
}

// Error implements error: `line 7: models.mnist: unknown key "modle" (…)`.
func (e *Error) Error() string {
	msg := e.Msg
	if e.Path != "" {
		msg = e.Path + ": " + msg
	}
	if e.Line <= 0 {
		return msg
	}
	return "line " + strconv.Itoa(e.Line) + ": " + msg
}

// Load reads and parses the map file at path; errors name the file.
func Load(path string) (*Map, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	m, err := Parse(data)
	if err != nil {
		return nil, errorIn(path, err)
	}
	return m, nil
}

// readFile reads at most MaxFileBytes of the regular file at path,
// without blocking on a FIFO or reading a device without end; its errors
// name the path.
func readFile(path string) ([]byte, error) { return fileread.Read(path, MaxFileBytes) }

// Parse parses and validates a map document. The error is an *Error
// naming the line of the first problem: YAML syntax, a key that is not
// part of the format, a duplicate key, a value of the wrong type (all
// found by the YAML decoder), or a value the format refuses: a server
// that is used but not defined, a label without a version, renames or
// metadata that contradict each other (found by validate).
func Parse(data []byte) (*Map, error) {
	// The node tree gives the lines of the errors found after decoding.
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, syntaxError(data, err)
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	if err := checkMappings(root); err != nil {
		return nil, err
	}
	var raw rawMap
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return nil, decodeError(root, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &Error{Line: next.Line, Msg: "a second YAML document: a model map is one document"}
	case !errors.Is(err, io.EOF):
		return nil, syntaxError(data, err)
	}
	m, problems := validate(&raw)
	if len(problems) == 0 {
		return m, nil
	}
	// Report the problem nearest the top of the file.
	var first *Error
	for _, p := range problems {
		e := &Error{Line: lineOf(root, p.path), Path: p.path.String(), Msg: p.msg}
		if first == nil || e.Line < first.Line {
			first = e
		}
	}
	return nil, first
}
