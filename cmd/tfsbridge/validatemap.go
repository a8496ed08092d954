package main

import (
	"context"
	"fmt"
	"io"

	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
)

const validateMapSummary = `Checks a model map file (see --model-map) offline: exits 0 when it is valid, 2 with
the first problem and its line when it is not.`

// validateMap is "tfsbridge validate-map FILE". The file is checked while
// the command line is parsed, so an invalid map is a usage error (exit 2)
// like a bad --model-map at startup.
type validateMap struct {
	file string
	m    *modelmap.Map
}

func parseValidateMap(args []string, env lookupEnv, out io.Writer) (*validateMap, error) {
	f := newFlagSet("validate-map", validateMapSummary, out)
	f.fs.Usage = func() {
		fmt.Fprintf(out, "Usage: tfsbridge validate-map FILE\n\n%s\n", validateMapSummary)
	}
	if err := f.fs.Parse(args); err != nil {
		return nil, err
	}
	if f.fs.NArg() != 1 {
		return nil, fmt.Errorf("validate-map: want exactly one FILE argument, got %d", f.fs.NArg())
	}
	v := &validateMap{file: f.fs.Arg(0)}
	m, err := modelmap.Load(v.file)
	if err != nil {
		return nil, err
	}
	v.m = m
	return v, nil
}

func (v *validateMap) run(_ context.Context, stdout, _ io.Writer) error {
	fmt.Fprintf(stdout, "%s: valid model map (%d models, %d servers besides default)\n", v.file, len(v.m.Models), len(v.m.Servers))
	return nil
}

// checkModelMap validates --model-map at startup: a bad file is a usage
// error (exit 2) naming the line, before anything listens.
func checkModelMap(path string) error {
	if path == "" {
		return nil
	}
	_, err := modelmap.Load(path)
	if err != nil {
		return fmt.Errorf("--model-map %w", err)
	}
	return nil
}
