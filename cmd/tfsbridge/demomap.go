package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// demoMap is the model map the demo starts with when --model-map is not
// given: one of each thing a map does, on the mock's models.
const demoMap = `# tfsbridge demo's model map (give --model-map FILE to use your own).
models:
  half_plus_two:
    labels: {stable: 1}        # /v1/models/half_plus_two/labels/stable → version 1
  calculator:                  # a TF name for the mock's multi_out model
    model: multi_out
    inputs: {pair: x}          # TF input "pair" is the v2 input "x"
    outputs: {total: sum}      # the v2 output "sum" is the TF output "total"
`

// demoMapCurls show what demoMap does; %s is the proxy's address.
var demoMapCurls = []string{
	`curl -d '{"instances": [1.0, 2.0, 5.0]}' -X POST http://%s/v1/models/half_plus_two/labels/stable:predict`,
	`curl -d '{"instances": [{"pair": [1.0, 2.0]}]}' -X POST http://%s/v1/models/calculator:predict`,
	`curl http://%s/v1/models/calculator/metadata`,
}

// writeDemoMap writes demoMap to a fresh temporary directory and returns
// the file and a cleanup that removes it.
func writeDemoMap() (string, func(), error) {
	dir, err := os.MkdirTemp("", "tfsbridge-demo-")
	if err != nil {
		return "", nil, fmt.Errorf("demo model map: %w", err)
	}
	path := filepath.Join(dir, "model-map.yaml")
	if err := os.WriteFile(path, []byte(demoMap), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("demo model map: %w", err)
	}
	return path, func() { _ = os.RemoveAll(dir) }, nil
}

// printDemoMap prints the demo map's curl commands (only for the demo's
// own map: a map of the user's own names other models).
func printDemoMap(w io.Writer, proxy string, mapFile string) {
	fmt.Fprintf(w, "\nThe model map (%s): a label, a renamed model, renamed tensors:\n\n", mapFile)
	for _, c := range demoMapCurls {
		fmt.Fprintf(w, "  "+c+"\n", proxy)
	}
}
