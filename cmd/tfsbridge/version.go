package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tfsbridge/tfsbridge/internal/buildinfo"
)

// versionCommand prints the build's version line, as --version does.
func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and VCS revision (also --version)",
		Long:  "Prints the module version and VCS revision of this build.",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(c.OutOrStdout(), buildinfo.Get())
			return err
		},
	}
}
