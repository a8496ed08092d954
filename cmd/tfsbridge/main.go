// Command tfsbridge lets legacy TensorFlow Serving REST clients talk to
// Open Inference Protocol (v2) servers — Triton, KServe, MLServer.
//
//	tfsbridge extproc   Envoy ext_proc gRPC service (the main form)
//	tfsbridge proxy     standalone HTTP reverse proxy
//	tfsbridge mock      built-in v2 mock server with sample models
//	tfsbridge validate-map FILE   check a model map file
//	tfsbridge demo      mock + proxy + ext_proc in one process
//	tfsbridge version   version and VCS revision (also --version)
//
// Every flag can also be set from the environment: --grpc-addr is
// TFSBRIDGE_GRPC_ADDR. "tfsbridge <command> --help" lists them all.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
)

const mainUsage = `tfsbridge: TensorFlow Serving REST clients in front of Open Inference Protocol (v2) servers.

Usage: tfsbridge <command> [flags]

Commands:
  extproc   Envoy ext_proc gRPC service (the main form)
  proxy     standalone HTTP reverse proxy
  mock      built-in v2 mock server with sample models
  validate-map FILE   check a model map file (exit 0 valid, 2 invalid)
  demo      mock + proxy + ext_proc in one process, with curl examples
  version   print the version and VCS revision (also --version)

"tfsbridge <command> --help" lists a command's flags; each flag can also be set
from the environment variable TFSBRIDGE_<FLAG> (e.g. TFSBRIDGE_GRPC_ADDR).
`

func main() {
	// Before the flags, whose --max-inflight-bytes default derives from
	// the memory limit: a GOMEMLIMIT-less process in a container gets a
	// soft limit from the cgroup, so the heap shrinks back after bursts.
	admission.SetSoftMemoryLimit(os.LookupEnv, admission.CgroupMemoryMax)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is a parsed subcommand ready to run.
type command interface {
	run(ctx context.Context, stdout, stderr io.Writer) error
}

// run parses and runs one command line and returns the exit code: 0 on a
// clean stop or help, 2 on a usage error, 1 on a failure.
func run(ctx context.Context, args []string, env lookupEnv, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return 2
	}
	cmd, err := parseCommand(args[0], args[1:], env, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "tfsbridge: %v\n", err)
		return 2
	case cmd == nil:
		fmt.Fprint(stdout, mainUsage)
		return 0
	}
	stopTracing, err := startTracing(ctx, env)
	if err != nil {
		fmt.Fprintf(stderr, "tfsbridge: %v\n", err)
		return 2
	}
	defer stopTracing()
	if err := cmd.run(ctx, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "tfsbridge %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// parseCommand parses a subcommand's flags; a nil command means help.
func parseCommand(name string, args []string, env lookupEnv, out io.Writer) (command, error) {
	switch name {
	case "extproc":
		o, err := parseExtproc(args, env, out)
		return ignoreStdout{o}, err
	case "proxy":
		o, err := parseProxy(args, env, out)
		return ignoreStdout{o}, err
	case "mock":
		o, err := parseMock(args, env, out)
		return ignoreStdout{o}, err
	case "validate-map":
		return parseValidateMap(args, env, out)
	case "demo":
		return parseDemo(args, env, out)
	case "version", "-version", "--version":
		return parseVersion(args, out)
	case "help", "-h", "-help", "--help":
		return nil, nil
	}
	return nil, fmt.Errorf("unknown command %q (want extproc, proxy, mock, demo or validate-map; see tfsbridge help)", name)
}

// ignoreStdout adapts the commands that only log (to stderr).
type ignoreStdout struct {
	c interface {
		run(ctx context.Context, stderr io.Writer) error
	}
}

func (i ignoreStdout) run(ctx context.Context, _, stderr io.Writer) error {
	return i.c.run(ctx, stderr)
}
