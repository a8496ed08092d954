package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// singleDashFlag finds a long flag written with one dash, as the standard
// flag package printed them.
var singleDashFlag = regexp.MustCompile(`(^|[\s"'])-[a-z][a-z-]+`)

// TestExitCodes runs command lines and checks the exit code and that an
// error is printed once, on one line, in double-dash form.
func TestExitCodes(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, tt := range []struct {
		name       string
		args       []string
		env        map[string]string
		code       int
		stdout     string // a substring
		stderr     string // the whole line, "" for none
		stderrPart string // a substring when the line is not fixed
	}{
		{name: "help", args: []string{"--help"}, code: 0, stdout: "Available Commands:"},
		{name: "help command", args: []string{"help", "proxy"}, code: 0, stdout: "--request-timeout duration"},
		{name: "version", args: []string{"version"}, code: 0, stdout: "tfsbridge "},
		{name: "--version", args: []string{"--version"}, code: 0, stdout: "(revision "},
		{name: "completion", args: []string{"completion", "bash"}, code: 0, stdout: "bash completion"},
		{name: "completion zsh", args: []string{"completion", "zsh"}, code: 0, stdout: "compdef"},
		{name: "no command", code: 2, stderr: `tfsbridge: missing command (see "tfsbridge --help")`},
		{name: "unknown command", args: []string{"serve"}, code: 2, stderr: `tfsbridge: unknown command "serve" for "tfsbridge" (see "tfsbridge --help")`},
		{name: "unknown flag", args: []string{"extproc", "--nope"}, code: 2, stderr: `tfsbridge: unknown flag: --nope (see "tfsbridge extproc --help")`},
		{name: "bad size", args: []string{"proxy", "--max-body-bytes", "lots"}, code: 2, stderrPart: `"--max-body-bytes"`},
		{name: "bad log level from env", args: []string{"mock"}, env: map[string]string{"TFSBRIDGE_LOG_LEVEL": "loud"}, code: 2, stderrPart: `environment TFSBRIDGE_LOG_LEVEL="loud" (--log-level): want debug, info, warn or error`},
		{name: "bad log format", args: []string{"demo", "--log-format=xml"}, code: 2, stderrPart: `invalid argument "xml" for "--log-format" flag: want text or json`},
		{name: "bad env value", args: []string{"extproc"}, env: map[string]string{"TFSBRIDGE_MAX_BODY_BYTES": "64Mo"},
			code: 2, stderrPart: `environment TFSBRIDGE_MAX_BODY_BYTES="64Mo" (--max-body-bytes): invalid size`},
		{name: "invalid value", args: []string{"extproc", "--max-body-bytes=0"}, code: 2, stderrPart: "--max-body-bytes must be positive"},
		{name: "version argument", args: []string{"version", "x"}, code: 2, stderrPart: `"x"`},
		{name: "runtime failure", args: []string{"mock", "--http-addr", held.Addr().String(), "--log-level", "error"},
			code: 1, stderrPart: "tfsbridge mock: mock listener: listen tcp " + held.Addr().String()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, envOf(tt.env), &stdout, &stderr)
			if code != tt.code || !strings.Contains(stdout.String(), tt.stdout) {
				t.Errorf("exit %d, stdout %q; want %d and %q", code, stdout.String(), tt.code, tt.stdout)
			}
			e := stderr.String()
			switch {
			case tt.stderr == "" && tt.stderrPart == "":
				if e != "" {
					t.Errorf("stderr %q, want nothing", e)
				}
			case strings.Count(e, "\n") != 1 || !strings.HasSuffix(e, "\n"):
				t.Errorf("stderr %q, want the error once, on one line", e)
			case tt.stderr != "" && e != tt.stderr+"\n":
				t.Errorf("stderr %q, want %q", e, tt.stderr)
			case !strings.Contains(e, tt.stderrPart) || !strings.HasPrefix(e, "tfsbridge"):
				t.Errorf("stderr %q, want a tfsbridge line with %q", e, tt.stderrPart)
			case singleDashFlag.MatchString(e):
				t.Errorf("stderr %q names a flag with one dash", e)
			}
		})
	}
}

// Sizes are quantities: the deploy files' 64Mi, the help's 64MiB and a
// byte count are the same, on the command line and in the environment;
// --grpc-max-recv-bytes 0 is the documented "none of ours".
func TestSizeFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  map[string]string
	}{
		{args: []string{"--max-body-bytes", "64Mi", "--grpc-max-recv-bytes", "0"}},
		{args: []string{"--max-body-bytes=64MiB", "--grpc-max-recv-bytes=0"}},
		{args: []string{"--max-body-bytes", "67108864"}},
		{env: map[string]string{"TFSBRIDGE_MAX_BODY_BYTES": "64Mi", "TFSBRIDGE_GRPC_MAX_RECV_BYTES": "0"}},
		{env: map[string]string{"TFSBRIDGE_MAX_BODY_BYTES": "67108864"}},
	} {
		o, err := parseExtproc(tt.args, envOf(tt.env), io.Discard)
		if err != nil {
			t.Errorf("%v %v: %v", tt.args, tt.env, err)
			continue
		}
		if b := o.options(nil); b.MaxBodyBytes != 64<<20 || b.GRPCMaxRecvBytes != 0 {
			t.Errorf("%v %v: body %d, grpc recv %d; want 64Mi and 0", tt.args, tt.env, b.MaxBodyBytes, b.GRPCMaxRecvBytes)
		}
	}
	o, err := parseExtproc([]string{"--grpc-max-recv-bytes", "80Mi"}, envOf(nil), io.Discard)
	if err != nil || o.options(nil).GRPCMaxRecvBytes != 80<<20 {
		t.Errorf("--grpc-max-recv-bytes 80Mi: %v", err)
	}
}

// A flag whose meaning differs per command reads its command's variable:
// a TFSBRIDGE_HTTP_ADDR meant for the proxy moves neither mock nor demo.
func TestCommandEnv(t *testing.T) {
	env := map[string]string{
		"TFSBRIDGE_HTTP_ADDR":         "10.0.0.1:8501",
		"TFSBRIDGE_METRICS_ADDR":      "10.0.0.1:9090",
		"TFSBRIDGE_GRPC_ADDR":         "10.0.0.1:9002",
		"TFSBRIDGE_MOCK_HTTP_ADDR":    "127.0.0.1:18000",
		"TFSBRIDGE_DEMO_HTTP_ADDR":    "127.0.0.1:18501",
		"TFSBRIDGE_DEMO_METRICS_ADDR": "",
		"TFSBRIDGE_LOG_LEVEL":         "debug", // the same on every command
	}
	p, err := parseProxy(nil, envOf(env), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseAs[*mockOptions]("mock", nil, envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	d, err := parseDemo(nil, envOf(env), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	e, err := parseExtproc(nil, envOf(env), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, got, want string }{
		{"proxy --http-addr", p.addrs.Proxy, "10.0.0.1:8501"},
		{"proxy --metrics-addr", p.addrs.Admin, "10.0.0.1:9090"},
		{"extproc --grpc-addr", e.addrs.Extproc, "10.0.0.1:9002"},
		{"mock --http-addr", m.httpAddr, "127.0.0.1:18000"},
		{"demo --http-addr", d.addrs.Proxy, "127.0.0.1:18501"},
		{"demo --grpc-addr", d.addrs.Extproc, "127.0.0.1:9002"},
		{"demo --metrics-addr", d.addrs.Admin, ""},
		{"proxy --log-level", p.log.level, "debug"},
		{"mock --log-level", m.log.level, "debug"},
		{"demo --log-level", d.log.level, "debug"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	// The command line wins over the command's variable.
	d, err = parseDemo([]string{"--http-addr=127.0.0.1:0"}, envOf(env), io.Discard)
	if err != nil || d.addrs.Proxy != "127.0.0.1:0" {
		t.Errorf("demo --http-addr over TFSBRIDGE_DEMO_HTTP_ADDR: %v, %q", err, d.addrs.Proxy)
	}
}

// Single-dash long flags, which the standard flag package took, still
// work; values and arguments after "--" are left alone.
func TestLongDashArgs(t *testing.T) {
	root, _ := newTree(envOf(nil))
	c, _, err := root.Find([]string{"proxy"})
	if err != nil {
		t.Fatal(err)
	}
	c.InitDefaultHelpFlag()
	for _, tt := range []struct{ in, want []string }{
		{[]string{"-request-timeout=7s", "-http-addr", ":1"}, []string{"--request-timeout=7s", "--http-addr", ":1"}},
		{[]string{"--log-format", "-json"}, []string{"--log-format", "-json"}},
		{[]string{"-log-format", "-log-level"}, []string{"--log-format", "-log-level"}},
		{[]string{"-help"}, []string{"--help"}},
		{[]string{"-h", "-nope"}, []string{"-h", "-nope"}},
		{[]string{"--", "-backend"}, []string{"--", "-backend"}},
	} {
		if got := longDashArgs(c.Flags(), tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("longDashArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
