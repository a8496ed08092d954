package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tfsbridge/tfsbridge/internal/buildinfo"
)

const rootLong = `tfsbridge: TensorFlow Serving REST clients in front of Open Inference Protocol (v2) servers.

"tfsbridge <command> --help" lists a command's flags. Each flag can also be set from
the environment variable shown next to it: TFSBRIDGE_<FLAG> (e.g. TFSBRIDGE_GRPC_ADDR)
where the flag means the same on every command, TFSBRIDGE_<COMMAND>_<FLAG> (e.g.
TFSBRIDGE_DEMO_HTTP_ADDR) where its meaning or default is the command's own. The command
line wins over the environment. Usage errors exit 2, failures 1.`

// subcommand is a command that serves: it registers its flags, checks
// them once the command line and the environment are applied, and runs.
type subcommand interface {
	register(fs *pflag.FlagSet)
	validate() error
	run(ctx context.Context, stdout, stderr io.Writer) error
}

// newRoot builds tfsbridge's command tree, reading the environment
// through env.
func newRoot(env lookupEnv) *cobra.Command {
	root, _ := newTree(env)
	return root
}

// newTree builds the command tree and returns the serving commands'
// options by name, so that tests can look at what a command line set.
func newTree(env lookupEnv) (*cobra.Command, map[string]subcommand) {
	root := &cobra.Command{
		Use:           "tfsbridge",
		Short:         "TensorFlow Serving REST clients in front of v2 inference servers",
		Long:          rootLong,
		Version:       buildinfo.Get().String(),
		SilenceErrors: true, // run prints each error once
		SilenceUsage:  true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("missing command")
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	subs := map[string]subcommand{
		"extproc": &extprocOptions{},
		"proxy":   &proxyOptions{},
		"mock":    &mockOptions{},
		"demo":    &demoOptions{},
	}
	root.AddCommand(
		serveCommand("extproc", "Envoy ext_proc gRPC service (the main form)", extprocSummary, subs["extproc"], env),
		serveCommand("proxy", "Standalone HTTP reverse proxy", proxySummary, subs["proxy"], env),
		serveCommand("mock", "Built-in v2 mock server with sample models", mockSummary, subs["mock"], env),
		serveCommand("demo", "Mock + proxy + ext_proc in one process, with curl examples", demoSummary, subs["demo"], env),
		validateMapCommand(),
		versionCommand(),
	)
	return root, subs
}

// serveCommand wraps a subcommand: flags, then environment, then checks
// and tracing set-up (usage errors), then the run (failures).
func serveCommand(name, short, long string, s subcommand, env lookupEnv) *cobra.Command {
	c := &cobra.Command{
		Use:   name + " [flags]",
		Short: short,
		Long:  long,
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := prepare(c.Flags(), s, env); err != nil {
				return err
			}
			// OTEL_* variables are read here; a bad one is a usage error.
			stopTracing, err := startTracing(c.Context(), env)
			if err != nil {
				return err
			}
			defer stopTracing()
			if err := s.run(c.Context(), c.OutOrStdout(), c.ErrOrStderr()); err != nil {
				return &runtimeError{err}
			}
			return nil
		},
	}
	s.register(c.Flags())
	showEnv(c.Flags())
	return c
}

// prepare applies the environment to the flags the command line left
// alone and checks the result.
func prepare(fs *pflag.FlagSet, s subcommand, env lookupEnv) error {
	if err := applyEnv(fs, env); err != nil {
		return err
	}
	return s.validate()
}

// noArgs refuses positional arguments (a forgotten "--" or a stray value).
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q", args[0])
	}
	return nil
}

// normalizeArgs rewrites single-dash long flags (-version, -http-addr=x)
// of the command args name to pflag's double-dash form.
func normalizeArgs(root *cobra.Command, args []string) []string {
	root.InitDefaultHelpFlag()
	root.InitDefaultVersionFlag()
	cmd, _, err := root.Find(args)
	if err != nil {
		cmd = root
	}
	cmd.InitDefaultHelpFlag()
	return longDashArgs(cmd.Flags(), args)
}
