package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
)

const validateMapSummary = `Checks a model map file (see --model-map) offline: exits 0 when it is valid, 2 with
the first problem and its line when it is not.`

// validateMapCommand is "tfsbridge validate-map FILE". An invalid map is a
// usage error (exit 2), like a bad --model-map at startup.
func validateMapCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "validate-map FILE",
		Short: "Check a model map file (exit 0 valid, 2 invalid)",
		Long:  validateMapSummary,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("validate-map: want exactly one FILE argument, got %d", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			m, err := modelmap.Load(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "%s: valid model map (%s)\n", args[0], m.Summary())
			return nil
		},
	}
}

// checkModelMap validates --model-map at startup: a bad file is a usage
// error (exit 2) naming the line, before anything listens.
func checkModelMap(path string) error {
	if path == "" {
		return nil
	}
	if _, err := modelmap.Load(path); err != nil {
		return &flagProblem{flag: "model-map", problem: err.Error()}
	}
	return nil
}
