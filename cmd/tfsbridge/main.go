// Command tfsbridge lets legacy TensorFlow Serving REST clients talk to
// Open Inference Protocol (v2) servers — Triton, KServe, MLServer.
//
//	tfsbridge extproc   Envoy ext_proc gRPC service (the main form)
//	tfsbridge proxy     standalone HTTP reverse proxy
//	tfsbridge mock      built-in v2 mock server with sample models
//	tfsbridge validate-map FILE   check a model map file
//	tfsbridge demo      mock + proxy + ext_proc in one process
//	tfsbridge compare   compare two endpoints' answers offline
//	tfsbridge version   version and VCS revision (also --version)
//	tfsbridge completion bash|zsh|fish|powershell
//
// Every flag can also be set from the environment (see config.go for the
// naming rule). "tfsbridge <command> --help" lists them all.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
	"github.com/tfsbridge/tfsbridge/proxy/bridge"
)

func main() {
	// Before the flags, whose --max-inflight-bytes default derives from
	// the memory limit: a GOMEMLIMIT-less process in a container gets a
	// soft limit from the cgroup, so the heap shrinks back after bursts.
	admission.SetSoftMemoryLimit(os.LookupEnv, admission.CgroupMemoryMax)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(bridge.WithReloads(ctx, hangups()), os.Args[1:], osEnv{}, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// hangups turns SIGHUP, which would otherwise kill the process (exit 129,
// in-flight requests cut), into a request to reload the model map and the
// TLS certificates now; each serving bridge logs it. Commands without a
// bridge (mock) ignore it.
func hangups() *bridge.Reloads {
	r := bridge.NewReloads()
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	go func() {
		for range ch {
			r.Notify()
		}
	}()
	return r
}

// Exit codes.
const (
	exitOK      = 0 // clean stop, help, version
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // the command line or environment is wrong
)

// runtimeError marks an error of a command that started running; every
// other error is the command line's (or the environment's).
type runtimeError struct{ err error }

func (e *runtimeError) Error() string { return e.err.Error() }
func (e *runtimeError) Unwrap() error { return e.err }

// run parses and runs one command line and returns the exit code. Each
// error is printed once, on one line, to stderr.
func run(ctx context.Context, args []string, env environment, stdout, stderr io.Writer) int {
	root := newRoot(env)
	root.SetArgs(normalizeArgs(root, args))
	root.SetOut(stdout)
	root.SetErr(stderr)
	strictCompletion(root)
	cmd, err := root.ExecuteContextC(ctx)
	var rt *runtimeError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &rt):
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), rt.err)
		return exitFailure
	}
	fmt.Fprintf(stderr, "tfsbridge: %v (see \"%s --help\")\n", err, cmd.CommandPath())
	return exitUsage
}
