package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/tfsbridge/tfsbridge/internal/buildinfo"
)

// versionCommand prints the build's version line.
type versionCommand struct{}

// parseVersion accepts no flags but --help.
func parseVersion(args []string, out io.Writer) (command, error) {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintln(out, "Usage: tfsbridge version\n\nPrints the version and VCS revision of this build.")
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("version takes no arguments, got %q", fs.Args())
	}
	return versionCommand{}, nil
}

func (versionCommand) run(_ context.Context, stdout, _ io.Writer) error {
	_, err := fmt.Fprintln(stdout, buildinfo.Get())
	return err
}
