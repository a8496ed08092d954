package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// demoMap is the model map the demo starts with when --model-map is not
// given: one of each thing a map does, on the mock's models, and the
// migration's split and shadow. The shadow goes to TF Serving, so the
// converted share's answers are checked against TF Serving's and every
// 2.501 shows as a mismatch; TF Serving's own share is not shadowed (a
// server is never compared with itself). The other direction works too:
// `shadow: {server: converted}` would compare TF Serving's share with the
// converted model, its sampled exchanges observed as they pass through
// (proxy/session/shadow.go). The split model is half_plus_two under a
// name of its own, so the other printed curls keep their answers. %[1]s is the mock's TF Serving face, %[2]s the
// perturbed mock, %[3]s its kind.
const demoMap = `# tfsbridge demo's model map (give --model-map FILE to use your own).
servers:
  tf-serving: {url: "http://%[1]s", kind: tfserving}   # "TF Serving": the mock's TF Serving face
  converted: {url: "http://%[2]s", kind: %[3]s}       # the converted model: a mock whose half_plus_two is 0.001 off
models:
  half_plus_two:
    labels: {stable: 1}        # /v1/models/half_plus_two/labels/stable → version 1
  calculator:                  # a TF name for the mock's multi_out model
    model: multi_out
    inputs: {pair: x}          # TF input "pair" is the v2 input "x"
    outputs: {total: sum}      # the v2 output "sum" is the TF output "total"
  half_plus_two_split:         # half_plus_two mid-migration, under a name of its own
    model: half_plus_two       # the v2 name, for the converted share (TF Serving gets the path as sent)
    split: {tf-serving: 90, converted: 10}
    split_key: x-user-id       # the same user always reaches the same server
    shadow: {server: tf-serving, sample: 1.0}   # the converted share's requests also go to TF Serving, compared
`

// demoFaceMap is the model map of the mock's TF Serving face: it serves
// half_plus_two under the split model's TF name too, since a TF Serving
// server gets the path as the client sent it.
const demoFaceMap = `# The demo's "TF Serving" (the mock's TF Serving face) serves half_plus_two as half_plus_two_split too.
models:
  half_plus_two_split: {model: half_plus_two}
`

// demoSplitModel is the demo map's model split between "TF Serving" and
// the converted model; demoPerturbModel is the mock model behind it,
// which the perturbed mock answers demoPerturbDelta off.
const (
	demoSplitModel   = "half_plus_two_split"
	demoPerturbModel = "half_plus_two"
	demoPerturbDelta = 0.001
)

// demoMapCurls show what demoMap does; %s is the proxy's address.
var demoMapCurls = []string{
	`curl -d '{"instances": [1.0, 2.0, 5.0]}' -X POST http://%s/v1/models/half_plus_two/labels/stable:predict`,
	`curl -d '{"instances": [{"pair": [1.0, 2.0]}]}' -X POST http://%s/v1/models/calculator:predict`,
	`curl http://%s/v1/models/calculator/metadata`,
}

// demoMaps are the demo's model map files in a temporary directory.
type demoMaps struct {
	dir  string
	face string // the TF Serving face's map, always written
}

// newDemoMaps makes the temporary directory and writes the face's map.
func newDemoMaps() (*demoMaps, error) {
	dir, err := os.MkdirTemp("", "tfsbridge-demo-")
	if err != nil {
		return nil, fmt.Errorf("demo model map: %w", err)
	}
	m := &demoMaps{dir: dir}
	if m.face, err = m.write("tf-serving-map.yaml", demoFaceMap); err != nil {
		m.cleanup()
		return nil, err
	}
	return m, nil
}

// writeMain writes the demo's own map for the face at face and the
// perturbed mock of the given kind at converted (host:port each).
func (m *demoMaps) writeMain(face, converted, kind string) (string, error) {
	return m.write("model-map.yaml", fmt.Sprintf(demoMap, face, converted, kind))
}

func (m *demoMaps) write(name, text string) (string, error) {
	path := filepath.Join(m.dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return "", fmt.Errorf("demo model map: %w", err)
	}
	return path, nil
}

func (m *demoMaps) cleanup() { _ = os.RemoveAll(m.dir) }

// printDemoMap prints the demo map's curl commands (only for the demo's
// own map: a map of the user's own names other models).
func printDemoMap(w io.Writer, proxy string, mapFile string) {
	fmt.Fprintf(w, "\nThe model map (%s): a label, a renamed model, renamed tensors:\n\n", mapFile)
	for _, c := range demoMapCurls {
		fmt.Fprintf(w, "  "+c+"\n", proxy)
	}
}

// demoMigration is what printDemoMigration needs: the client addresses
// of the proxy, the admin listener ("" when off), the mock's TF Serving
// face and the perturbed mock.
type demoMigration struct {
	proxy, admin, face, converted string
}

// printDemoMigration prints the migration block: the split model's
// counts and stickiness, the shadow's counter and an offline compare of
// "TF Serving" with the converted model (exit 1: the drift is found).
func printDemoMigration(w io.Writer, m demoMigration) {
	predict := fmt.Sprintf(`-d '{"instances": [1.0]}' -X POST http://%s/v1/models/%s:predict`, m.proxy, demoSplitModel)
	fmt.Fprintf(w, "\nMigration: %s is split 90/10 between \"TF Serving\" (the mock's TF face) and the\n", demoSplitModel)
	fmt.Fprintf(w, "converted model (the mock with %s %+g), sticky on x-user-id; each request the converted\n", demoPerturbModel, demoPerturbDelta)
	fmt.Fprintf(w, "model answers is also sent to TF Serving and compared. The split (about 180 of 2.5, 20 of 2.501),\n")
	fmt.Fprintf(w, "one user on one server, the shadow's mismatches (one per 2.501), the drift found offline (exit 1):\n\n")
	fmt.Fprintf(w, "  for i in $(seq 200); do curl -s %s | tr -d ' \\n'; echo; done | sort | uniq -c\n", predict)
	fmt.Fprintf(w, "  for i in $(seq 20); do curl -s -H 'x-user-id: 42' %s | tr -d ' \\n'; echo; done | sort | uniq -c\n", predict)
	if m.admin != "" {
		fmt.Fprintf(w, "  curl -s http://%s/metrics | grep tfsbridge_shadow_comparisons_total\n", m.admin)
	}
	fmt.Fprintf(w, "  tfsbridge compare --reference tf:http://%s --candidate v2:http://%s --generate 50 --model %s\n", m.face, m.converted, demoPerturbModel)
}
