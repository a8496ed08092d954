package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tfsbridge/tfsbridge/internal/buildinfo"
	"github.com/tfsbridge/tfsbridge/proxy/bridge"
)

const rootLong = `tfsbridge: TensorFlow Serving REST clients in front of Open Inference Protocol (v2) servers.

"tfsbridge <command> --help" lists a command's flags. Each flag can also be set from
the environment variable shown next to it: TFSBRIDGE_<FLAG> (e.g. TFSBRIDGE_GRPC_ADDR)
where the flag means the same on every command, TFSBRIDGE_<COMMAND>_<FLAG> (e.g.
TFSBRIDGE_DEMO_HTTP_ADDR) where its meaning or default is the command's own. The command
line wins over the environment. Usage errors exit 2, failures 1.`

// subcommand is a command that serves: its flags are bound to its
// options' fields; check validates them once the command line and the
// environment are applied; then it runs.
type subcommand interface {
	bindings() []binding
	check() error
	run(ctx context.Context, stdout, stderr io.Writer) error
}

// newRoot builds tfsbridge's command tree, reading the environment
// through env.
func newRoot(env environment) *cobra.Command {
	root, _ := newTree(env)
	return root
}

// newTree builds the command tree and returns the serving commands'
// options by name, so that tests can look at what a command line set.
func newTree(env environment) (*cobra.Command, map[string]subcommand) {
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
		"extproc": newExtprocOptions(),
		"proxy":   newProxyOptions(),
		"mock":    newMockOptions(),
		"demo":    newDemoOptions(),
		"compare": newCompareOptions(),
	}
	root.AddCommand(
		serveCommand("extproc", "Envoy ext_proc gRPC service (the main form)", extprocSummary, subs["extproc"], env),
		serveCommand("proxy", "Standalone HTTP reverse proxy", proxySummary, subs["proxy"], env),
		serveCommand("mock", "Built-in v2 mock server with sample models", mockSummary, subs["mock"], env),
		serveCommand("demo", "Mock + proxy + ext_proc in one process, with curl examples", demoSummary, subs["demo"], env),
		serveCommand("compare", "Compare two endpoints' answers offline (exit 0 within tolerance, 1 over)", compareSummary, subs["compare"], env),
		validateMapCommand(),
		versionCommand(),
		docsCommand(),
	)
	return root, subs
}

// serveCommand wraps a subcommand: flags, then environment, then checks
// and tracing set-up (usage errors), then the run (failures).
func serveCommand(name, short, long string, s subcommand, env environment) *cobra.Command {
	c := &cobra.Command{
		Use:   name + " [flags]",
		Short: short,
		Long:  long,
		Args:  noArgs,
	}
	bs := s.bindings()
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := prepare(cmd, s, bs, env); err != nil {
			return err
		}
		warnUnknownEnv(cmd.ErrOrStderr(), cmd, env)
		// OTEL_* variables are read here; a bad one is a usage error.
		stopTracing, err := startTracing(cmd.Context(), env.LookupEnv)
		if err != nil {
			return err
		}
		defer stopTracing()
		if err := s.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()); err != nil {
			return &runtimeError{err}
		}
		return nil
	}
	register(c, bs)
	return c
}

// prepare applies the environment to the flags the command line left
// alone and checks the result. A problem is a usage error naming what the
// user wrote: the flag, or the variable.
func prepare(c *cobra.Command, s subcommand, bs []binding, env environment) error {
	set, err := applyEnv(c.Flags(), env)
	if err != nil {
		return err
	}
	err = s.check()
	var fe *bridge.FieldError
	if errors.As(err, &fe) {
		if o, ok := s.(interface{ fields() *bridge.Options }); ok {
			if name, ok := fieldFlags(o.fields(), bs)[fe.Field]; ok {
				err = &flagProblem{flag: name, problem: fe.Problem}
			}
		}
	}
	return set.describe(err)
}

// strictCompletion adds cobra's "completion" command, refusing a shell it
// has no script for (tcsh) as the usage error it is instead of printing
// help. Call it once root's output is set: cobra's scripts are written
// to the output root has when the command is made.
func strictCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		var shells []string
		for _, sh := range c.Commands() {
			shells = append(shells, sh.Name())
		}
		c.Args = func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("missing shell: want %s", orList(shells))
			}
			return fmt.Errorf("unknown shell %q: want %s", args[0], orList(shells))
		}
		c.RunE = func(*cobra.Command, []string) error { return nil } // Args refuses first
	}
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
