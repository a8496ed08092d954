package main

import (
	"bytes"
	"context"
	"encoding/json"
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
		// The HTTP side is already serving when the gRPC port fails: it is stopped.
		{name: "gRPC runtime failure", args: []string{"mock", "--http-addr", "127.0.0.1:0", "--grpc-addr", held.Addr().String(), "--log-level", "error"},
			code: 1, stderrPart: "tfsbridge mock: mock gRPC listener: listen tcp " + held.Addr().String()},
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

// TestBadValues runs command lines whose flag or variable values are
// wrong: each is a usage error (exit 2) on one line, naming the flag, or
// the variable and its value when the environment set it, and what the
// flag wants. Enums, URLs and addresses are checked before anything
// starts, not when the server is built or binds.
func TestBadValues(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want string // the whole line
	}{
		{[]string{"proxy", "--backend-kind", "trition"}, nil,
			`invalid argument "trition" for "--backend-kind" flag: want auto, triton, kserve or mlserver (did you mean triton?) (see "tfsbridge proxy --help")`},
		{[]string{"extproc"}, map[string]string{"TFSBRIDGE_BACKEND_KIND": "trition"},
			`environment TFSBRIDGE_BACKEND_KIND="trition" (--backend-kind): want auto, triton, kserve or mlserver (did you mean triton?) (see "tfsbridge extproc --help")`},
		{[]string{"proxy", "--backend", "localhost:8000"}, nil,
			`invalid argument "localhost:8000" for "--backend" flag: want an http:// or https:// URL such as http://127.0.0.1:8000 (did you mean http://localhost:8000?) (see "tfsbridge proxy --help")`},
		{[]string{"extproc"}, map[string]string{"TFSBRIDGE_BACKEND": "ftp://triton:8000"},
			`environment TFSBRIDGE_BACKEND="ftp://triton:8000" (--backend): want an http:// or https:// URL such as http://127.0.0.1:8000 (see "tfsbridge extproc --help")`},
		{[]string{"proxy", "--backend=http://triton:8000/?debug=1"}, nil,
			`invalid argument "http://triton:8000/?debug=1" for "--backend" flag: want a URL without a query or fragment (see "tfsbridge proxy --help")`},
		{[]string{"extproc", "--drain-envoy", "127.0.0.1:9901"}, nil,
			`invalid argument "127.0.0.1:9901" for "--drain-envoy" flag: want an http:// or https:// URL such as http://127.0.0.1:8000 (did you mean http://127.0.0.1:9901?) (see "tfsbridge extproc --help")`},
		{[]string{"extproc", "--body-mode", "duplex"}, nil,
			`invalid argument "duplex" for "--body-mode" flag: unknown body mode "duplex" (want auto, buffered or full-duplex) (see "tfsbridge extproc --help")`},
		{[]string{"proxy"}, map[string]string{"TFSBRIDGE_READINESS": "model"},
			`environment TFSBRIDGE_READINESS="model" (--readiness): want tfsbridge or backend (see "tfsbridge proxy --help")`},
		{[]string{"mock", "--log-level", "loud"}, nil,
			`invalid argument "loud" for "--log-level" flag: want debug, info, warn or error (see "tfsbridge mock --help")`},
		{[]string{"demo"}, map[string]string{"TFSBRIDGE_KIND": "trtion"},
			`environment TFSBRIDGE_KIND="trtion" (--kind): want triton, kserve or mlserver (did you mean triton?) (see "tfsbridge demo --help")`},
		{[]string{"proxy", "--http-addr", "8501"}, nil,
			`invalid argument "8501" for "--http-addr" flag: want host:port, such as 127.0.0.1:8501 or :8501, or unix:///path/to.sock (see "tfsbridge proxy --help")`},
		{[]string{"mock"}, map[string]string{"TFSBRIDGE_MOCK_HTTP_ADDR": "unix:///tmp/mock.sock"},
			`environment TFSBRIDGE_MOCK_HTTP_ADDR="unix:///tmp/mock.sock" (--http-addr): want host:port, such as 127.0.0.1:8501 or :8501 (see "tfsbridge mock --help")`},
		{[]string{"extproc", "--grpc-addr", ":99999"}, nil,
			`invalid argument ":99999" for "--grpc-addr" flag: want host:port, such as 127.0.0.1:8501 or :8501, or unix:///path/to.sock (see "tfsbridge extproc --help")`},
		{[]string{"extproc", "--grpc-addr", ""}, nil,
			`invalid argument "" for "--grpc-addr" flag: want host:port, such as 127.0.0.1:8501 or :8501, or unix:///path/to.sock (see "tfsbridge extproc --help")`},
		{[]string{"demo", "--mock-addr", "localhost"}, nil,
			`invalid argument "localhost" for "--mock-addr" flag: want host:port, such as 127.0.0.1:8501 or :8501 (see "tfsbridge demo --help")`},
		{[]string{"proxy", "--pprof=maybe"}, nil,
			`invalid argument "maybe" for "--pprof" flag: want true or false (see "tfsbridge proxy --help")`},
		{[]string{"proxy"}, map[string]string{"TFSBRIDGE_MAX_JSON_DEPTH": "deep"},
			`environment TFSBRIDGE_MAX_JSON_DEPTH="deep" (--max-json-depth): want a whole number (see "tfsbridge proxy --help")`},
		{[]string{"extproc", "--max-elements", "99999999999999999999"}, nil,
			`invalid argument "99999999999999999999" for "--max-elements" flag: out of range (see "tfsbridge extproc --help")`},
		{[]string{"proxy", "--backend-timeout", "soon"}, nil,
			`invalid argument "soon" for "--backend-timeout" flag: want a duration such as 250ms, 5s or 1m30s (see "tfsbridge proxy --help")`},
		// Values that parse but that the bridge refuses name the variable too.
		{[]string{"proxy"}, map[string]string{"TFSBRIDGE_MAX_JSON_DEPTH": "0"},
			`environment TFSBRIDGE_MAX_JSON_DEPTH="0" (--max-json-depth) must be positive (see "tfsbridge proxy --help")`},
		{[]string{"proxy", "--max-json-depth", "0"}, nil,
			`--max-json-depth must be positive (see "tfsbridge proxy --help")`},
		{[]string{"extproc", "--max-body-bytes=8MiB"}, map[string]string{"TFSBRIDGE_GRPC_MAX_RECV_BYTES": "1MiB"},
			`environment TFSBRIDGE_GRPC_MAX_RECV_BYTES="1MiB" (--grpc-max-recv-bytes) must be 0 (no limit of ours) or at least the body limit (see "tfsbridge extproc --help")`},
		{[]string{"extproc", "--tls-cert-file", dir + "/none.pem"}, nil,
			`invalid argument "` + dir + `/none.pem" for "--tls-cert-file" flag: stat ` + dir + `/none.pem: no such file or directory (see "tfsbridge extproc --help")`},
		{[]string{"proxy"}, map[string]string{"TFSBRIDGE_BACKEND_CA_FILE": dir},
			`environment TFSBRIDGE_BACKEND_CA_FILE="` + dir + `" (--backend-ca-file): ` + dir + `: not a regular file (a directory) (see "tfsbridge proxy --help")`},
		{[]string{"completion", "tcsh"}, nil,
			`unknown shell "tcsh": want bash, fish, powershell or zsh (see "tfsbridge completion --help")`},
		{[]string{"completion"}, nil,
			`missing shell: want bash, fish, powershell or zsh (see "tfsbridge completion --help")`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, envOf(tt.env), &stdout, &stderr)
			if want := "tfsbridge: " + tt.want + "\n"; code != exitUsage || stderr.String() != want {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and:\n%s", code, stderr.String(), want)
			}
		})
	}
}

// TestUnknownEnv runs commands with TFSBRIDGE_ variables they do not
// read: each is named in one warning line at start, before the command
// runs (here the mock, failing at once on a port in use), with the
// closest variable it reads or the commands that read it.
func TestUnknownEnv(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	env := map[string]string{
		"TFSBRIDGE_MOCK_HTTP_ADDR":  held.Addr().String(),
		"TFSBRIDGE_LOG_LEVLE":       "error", // a typo
		"TFSBRIDGE_BACKEND":         "http://triton:8000",
		"TFSBRIDGE_DEMO_HTTP_ADDR":  "127.0.0.1:0",
		"TFSBRIDGE_SOMETHING_ELSE":  "x",
		"TFSBRIDGE_SERVICE_HOST":    "10.0.0.1", // Kubernetes' service links: not warned about
		"TFSBRIDGE_PORT_9002_TCP":   "tcp://10.0.0.1:9002",
		"TFSBRIDGE_KIND":            "kserve", // read by mock
		"OTEL_SERVICE_NAME":         "tfsbridge",
		"TFSBRIDGE_DEMO_DRAIN_DELA": "1s",
	}
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"mock"}, envOf(env), io.Discard, &stderr)
	want := []string{
		`tfsbridge mock: warning: environment TFSBRIDGE_BACKEND is read by "tfsbridge extproc", "tfsbridge proxy", not by this command; ignored`,
		`tfsbridge mock: warning: environment TFSBRIDGE_DEMO_DRAIN_DELA is not a tfsbridge variable; ignored`,
		`tfsbridge mock: warning: environment TFSBRIDGE_DEMO_HTTP_ADDR is read by "tfsbridge demo", not by this command; ignored`,
		`tfsbridge mock: warning: environment TFSBRIDGE_LOG_LEVLE is not a tfsbridge variable; ignored (did you mean TFSBRIDGE_LOG_LEVEL?)`,
		`tfsbridge mock: warning: environment TFSBRIDGE_SOMETHING_ELSE is not a tfsbridge variable; ignored`,
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if code != exitFailure || len(lines) != len(want)+1 || !slices.Equal(lines[:len(want)], want) ||
		!strings.HasPrefix(lines[len(want)], "tfsbridge mock: mock listener: ") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 after:\n%s", code, stderr.String(), strings.Join(want, "\n"))
	}
}

// Enum flags complete their values in the shell, and every value offered
// is one the flag accepts.
func TestCompletion(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"proxy", "--backend-kind", ""}, []string{"auto", "triton", "kserve", "mlserver"}},
		{[]string{"extproc", "--body-mode", ""}, []string{"auto", "buffered", "full-duplex"}},
		{[]string{"extproc", "--passthrough", ""}, []string{"none", "inference", "all"}},
		{[]string{"proxy", "--readiness", ""}, []string{"tfsbridge", "backend"}},
		{[]string{"mock", "--kind", ""}, []string{"triton", "kserve", "mlserver"}},
		{[]string{"demo", "--log-level", ""}, []string{"debug", "info", "warn", "error"}},
		{[]string{"mock", "--log-format", ""}, []string{"text", "json"}},
	} {
		var out bytes.Buffer
		if code := run(context.Background(), append([]string{"__complete"}, tt.args...), envOf(nil), &out, io.Discard); code != 0 {
			t.Errorf("__complete %q: exit %d", tt.args, code)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if got := lines[:len(lines)-1]; !slices.Equal(got, tt.want) || lines[len(lines)-1] != ":4" { // 4: no file completion
			t.Errorf("__complete %q = %q, want %q and :4", tt.args, lines, tt.want)
		}
	}
	_, subs := newTree(envOf(nil))
	for _, name := range servingCommands {
		for _, b := range subs[name].bindings() {
			for _, v := range b.values {
				if err := b.value.Set(v); err != nil {
					t.Errorf("%s --%s completes %q, which it refuses: %v", name, b.name, v, err)
				}
			}
		}
	}
}

// notifyWriter passes each write containing match (slog writes a record
// in one call) to lines, so a test waits for the event itself.
type notifyWriter struct {
	match string
	lines chan string
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(w.match)) {
		select {
		case w.lines <- string(p):
		default:
		}
	}
	return len(p), nil
}

// The start log line names the addresses served and leaves out a server
// that is off (no metrics_addr=<nil>).
func TestStartLogLine(t *testing.T) {
	for _, tt := range []struct {
		args        []string
		has, lacks  []string
		startedWith string
	}{
		{[]string{"proxy", "--http-addr", "127.0.0.1:0", "--metrics-addr="}, []string{"http_addr"}, []string{"metrics_addr", "grpc_addr"}, "tfsbridge proxy serving"},
		{[]string{"extproc", "--grpc-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"}, []string{"grpc_addr", "metrics_addr"}, []string{"http_addr"}, "tfsbridge extproc serving"},
	} {
		t.Run(tt.args[0], func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := &notifyWriter{match: tt.startedWith, lines: make(chan string, 1)}
			done := make(chan int, 1)
			args := append(tt.args, "--log-format=json", "--drain-delay=0s")
			go func() { done <- run(ctx, args, envOf(nil), io.Discard, w) }()
			var line string
			select {
			case line = <-w.lines:
			case code := <-done:
				t.Fatalf("exited %d before logging %q", code, tt.startedWith)
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			for _, k := range tt.has {
				if v, _ := rec[k].(string); v == "" || strings.Contains(v, "nil") {
					t.Errorf("%s = %v in %s", k, rec[k], line)
				}
			}
			for _, k := range tt.lacks {
				if _, ok := rec[k]; ok {
					t.Errorf("%s is logged: %s", k, line)
				}
			}
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("exit %d after cancel", code)
			}
		})
	}
}
