package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/tfsbridge/tfsbridge/proxy/bridge"
	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// mapEnv is an environment for tests.
type mapEnv map[string]string

func (e mapEnv) LookupEnv(k string) (string, bool) {
	v, ok := e[k]
	return v, ok
}

func (e mapEnv) Names() []string { return slices.Collect(maps.Keys(e)) }

func envOf(kv map[string]string) environment { return mapEnv(kv) }

// parse parses one serving command's flags and environment as run does,
// without running it.
func parse(name string, args []string, env environment) (subcommand, error) {
	root, subs := newTree(env)
	c, _, err := root.Find([]string{name})
	if err != nil {
		return nil, err
	}
	if err := c.ParseFlags(longDashArgs(c.Flags(), args)); err != nil {
		return nil, err
	}
	if err := c.ValidateArgs(c.Flags().Args()); err != nil {
		return nil, err
	}
	s := subs[name]
	return s, prepare(c, s, s.bindings(), env)
}

func parseAs[T subcommand](name string, args []string, env environment) (T, error) {
	s, err := parse(name, args, env)
	t, _ := s.(T)
	return t, err
}

func parseExtproc(args []string, env environment, _ io.Writer) (*extprocOptions, error) {
	return parseAs[*extprocOptions]("extproc", args, env)
}

func parseProxy(args []string, env environment, _ io.Writer) (*proxyOptions, error) {
	return parseAs[*proxyOptions]("proxy", args, env)
}

func parseDemo(args []string, env environment, _ io.Writer) (*demoOptions, error) {
	return parseAs[*demoOptions]("demo", args, env)
}

func TestEnvName(t *testing.T) {
	for _, tt := range []struct {
		command, flag string
		own           bool
		want          string
	}{
		{"extproc", "grpc-addr", false, "TFSBRIDGE_GRPC_ADDR"},
		{"proxy", "max-body-bytes", false, "TFSBRIDGE_MAX_BODY_BYTES"},
		{"proxy", "backend", false, "TFSBRIDGE_BACKEND"},
		{"mock", "http-addr", true, "TFSBRIDGE_MOCK_HTTP_ADDR"},
		{"demo", "drain-delay", true, "TFSBRIDGE_DEMO_DRAIN_DELAY"},
	} {
		if got := envName(tt.command, binding{name: tt.flag, own: tt.own}); got != tt.want {
			t.Errorf("envName(%s, --%s) = %q, want %q", tt.command, tt.flag, got, tt.want)
		}
	}
}

func TestProxyFlagPrecedence(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		env         map[string]string
		wantAddr    string
		wantTimeout time.Duration
		wantBody    int64
		wantKind    string
	}{
		{name: "defaults", wantAddr: ":8501", wantTimeout: 30 * time.Second, wantBody: 64 << 20, wantKind: "auto"},
		{name: "environment", env: map[string]string{
			"TFSBRIDGE_HTTP_ADDR": "127.0.0.1:1", "TFSBRIDGE_REQUEST_TIMEOUT": "5s",
			"TFSBRIDGE_MAX_BODY_BYTES": "1MiB", "TFSBRIDGE_BACKEND_KIND": "kserve"},
			wantAddr: "127.0.0.1:1", wantTimeout: 5 * time.Second, wantBody: 1 << 20, wantKind: "kserve"},
		{name: "command line wins", args: []string{"--http-addr", ":2", "-request-timeout=7s", "--max-body-bytes=1000"},
			env:      map[string]string{"TFSBRIDGE_HTTP_ADDR": "127.0.0.1:1", "TFSBRIDGE_REQUEST_TIMEOUT": "5s"},
			wantAddr: ":2", wantTimeout: 7 * time.Second, wantBody: 1000, wantKind: "auto"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseProxy(tt.args, envOf(tt.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			b := o.bridge
			if o.addrs.Proxy != tt.wantAddr || b.Proxy.RequestTimeout != tt.wantTimeout || b.MaxBodyBytes != tt.wantBody || b.BackendKind != tt.wantKind {
				t.Errorf("got addr %q timeout %v body %d kind %q", o.addrs.Proxy, b.Proxy.RequestTimeout, b.MaxBodyBytes, b.BackendKind)
			}
		})
	}
}

// The proxy's client timeouts (a client trickling its body must not hold
// a connection forever) have flags with httpproxy's defaults.
func TestProxyTimeoutFlags(t *testing.T) {
	o, err := parseProxy(nil, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if p := o.bridge.Proxy; p.ReadTimeout != time.Minute || p.ReadHeaderTimeout != 10*time.Second || p.IdleTimeout != 2*time.Minute || p.WriteTimeout != time.Minute {
		t.Errorf("defaults: read %v, read-header %v, idle %v, write %v", p.ReadTimeout, p.ReadHeaderTimeout, p.IdleTimeout, p.WriteTimeout)
	}
	o, err = parseProxy([]string{"--read-timeout=3s", "--read-header-timeout=2s"},
		envOf(map[string]string{"TFSBRIDGE_IDLE_TIMEOUT": "4s", "TFSBRIDGE_WRITE_TIMEOUT": "5s"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if p := o.bridge.Proxy; p.ReadTimeout != 3*time.Second || p.ReadHeaderTimeout != 2*time.Second || p.IdleTimeout != 4*time.Second || p.WriteTimeout != 5*time.Second {
		t.Errorf("set: read %v, read-header %v, idle %v, write %v", p.ReadTimeout, p.ReadHeaderTimeout, p.IdleTimeout, p.WriteTimeout)
	}
	if got := o.options(nil).Proxy.WriteTimeout; got != 5*time.Second {
		t.Errorf("bridge write timeout %v, want 5s", got)
	}
}

// --passthrough (and TFSBRIDGE_PASSTHROUGH) reaches the bridge options
// of both serving commands; the default passes the inference endpoints.
func TestPassthroughFlag(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want session.Passthrough
	}{
		{nil, nil, session.PassthroughInference},
		{[]string{"--passthrough=none"}, nil, session.PassthroughNone},
		{nil, map[string]string{"TFSBRIDGE_PASSTHROUGH": "all"}, session.PassthroughAll},
		{[]string{"--passthrough", "inference"}, map[string]string{"TFSBRIDGE_PASSTHROUGH": "all"}, session.PassthroughInference},
	}
	for _, tt := range tests {
		p, e := servingOptions(t, tt.args, tt.env)
		if got := p.Passthrough; got != tt.want {
			t.Errorf("proxy %v %v: %v; want %v", tt.args, tt.env, got, tt.want)
		}
		if got := e.Passthrough; got != tt.want {
			t.Errorf("extproc %v %v: %v; want %v", tt.args, tt.env, got, tt.want)
		}
	}
}

// servingOptions parses args and env as "proxy" and as "extproc" and
// returns the bridge options of each.
func servingOptions(t *testing.T, args []string, env map[string]string) (proxy, extproc bridge.Options) {
	t.Helper()
	p, err := parseProxy(args, envOf(env), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	e, err := parseExtproc(args, envOf(env), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return p.options(nil), e.options(nil)
}

// --pprof reaches the bridge options of both serving commands, off by
// default; --grpc-addr takes a Unix domain socket.
func TestPprofAndSocketFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{nil, nil, false},
		{[]string{"--pprof"}, nil, true},
		{nil, map[string]string{"TFSBRIDGE_PPROF": "true"}, true},
		{[]string{"--pprof=false"}, map[string]string{"TFSBRIDGE_PPROF": "true"}, false},
	} {
		p, e := servingOptions(t, tt.args, tt.env)
		if p.Pprof != tt.want || e.Pprof != tt.want {
			t.Errorf("%v %v: proxy %v, extproc %v; want %v", tt.args, tt.env, p.Pprof, e.Pprof, tt.want)
		}
	}
	e, err := parseExtproc([]string{"--grpc-addr", "unix:///var/run/tfsbridge/extproc.sock"}, envOf(nil), io.Discard)
	if err != nil || e.addrs.Extproc != "unix:///var/run/tfsbridge/extproc.sock" {
		t.Errorf("--grpc-addr unix:///... = %+v, %v", e, err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name    string
		command string
		args    []string
		env     map[string]string
		want    string
	}{
		{"bad env value", "extproc", nil, map[string]string{"TFSBRIDGE_BACKEND_TIMEOUT": "soon"}, "TFSBRIDGE_BACKEND_TIMEOUT"},
		{"bad size", "proxy", []string{"--max-body-bytes", "lots"}, nil, "invalid size"},
		{"unknown flag", "extproc", []string{"--nope"}, nil, "nope"},
		{"positional", "proxy", []string{"extra"}, nil, "unexpected argument"},
		{"bad mock kind", "mock", []string{"--kind", "torchserve"}, nil, "torchserve"},
		{"negative ttl", "extproc", []string{"--metadata-error-ttl", "-1s"}, nil, "metadata-error-ttl"},
		{"zero write timeout", "proxy", []string{"--write-timeout", "0s"}, nil, "--write-timeout must be positive"},
		{"zero timeout", "proxy", []string{"--request-timeout", "0"}, nil, "request-timeout"},
		{"zero read timeout", "proxy", []string{"--read-timeout", "0s"}, nil, "read-timeout"},
		{"negative idle timeout", "proxy", nil, map[string]string{"TFSBRIDGE_IDLE_TIMEOUT": "-1s"}, "idle-timeout"},
		{"grpc recv below body", "extproc", []string{"--max-body-bytes", "8MiB", "--grpc-max-recv-bytes", "4MiB"}, nil, "--grpc-max-recv-bytes must be 0 (no limit of ours) or at least the body limit"},
		{"grpc recv from env", "extproc", []string{"--max-body-bytes=8MiB"}, map[string]string{"TFSBRIDGE_GRPC_MAX_RECV_BYTES": "1MiB"}, "grpc-max-recv-bytes"},
		{"bad passthrough", "proxy", []string{"--passthrough", "some"}, nil, "invalid pass-through policy \"some\""},
		{"bad passthrough env", "extproc", nil, map[string]string{"TFSBRIDGE_PASSTHROUGH": "ALL"}, "TFSBRIDGE_PASSTHROUGH"},
		{"empty socket path", "extproc", []string{"--grpc-addr", "unix://"}, nil, "invalid argument \"unix://\" for \"--grpc-addr\" flag: address \"unix://\""},
		{"socket with a host", "extproc", nil, map[string]string{"TFSBRIDGE_GRPC_ADDR": "unix://envoy/x.sock"}, "unix:///absolute/path"},
		{"unknown command", "serve", nil, nil, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(context.Background(), append([]string{tt.command}, tt.args...), envOf(tt.env), io.Discard, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 mentioning %q", code, stderr.String(), tt.want)
			}
		})
	}
}

// --help prints, on stdout, every flag with its variable and exits 0.
func TestHelp(t *testing.T) {
	root, _ := newTree(envOf(nil))
	for _, name := range []string{"extproc", "proxy", "mock", "demo"} {
		c, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		for _, help := range []string{"--help", "-h", "-help"} {
			var out, errOut bytes.Buffer
			if code := run(context.Background(), []string{name, help}, envOf(nil), &out, &errOut); code != 0 || errOut.Len() != 0 {
				t.Errorf("%s %s: exit %d, stderr %q", name, help, code, errOut.String())
			}
			text := out.String()
			if !strings.Contains(text, "tfsbridge "+name+" [flags]") {
				t.Errorf("%s %s: no usage line in:\n%s", name, help, text)
			}
			n := 0
			c.Flags().VisitAll(func(fl *pflag.Flag) {
				n++
				if !strings.Contains(text, "--"+fl.Name) || !strings.Contains(text, "[env "+flagEnv(fl)+"]") {
					t.Errorf("%s %s: flag --%s or its %s missing", name, help, fl.Name, flagEnv(fl))
				}
			})
			if n < 3 {
				t.Errorf("%s has %d flags", name, n)
			}
		}
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"help"}, envOf(nil), &out, io.Discard); code != 0 || !strings.Contains(out.String(), "extproc") {
		t.Errorf("help: exit %d, %q", code, out.String())
	}
}

func TestByteSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		str  string
	}{
		{"1048576", 1 << 20, "1MiB"},
		{"64MiB", 64 << 20, "64MiB"},
		{"64Mi", 64 << 20, "64MiB"},
		{"67108864", 64 << 20, "64MiB"},
		{"64mib", 64 << 20, "64MiB"},
		{"2KiB", 2048, "2KiB"},
		{"2Ki", 2048, "2KiB"},
		{"1GiB", 1 << 30, "1GiB"},
		{"1Gi", 1 << 30, "1GiB"},
		{"1.5Mi", 3 << 19, "1536KiB"},
		{"5MB", 5e6, "5000000"},
		{"5M", 5e6, "5000000"},
		{"3k", 3000, "3000"},
		{"1TB", 1e12, "976562500KiB"},
		{"1e3", 1000, "1000"},
		{"100", 100, "100"},
		{"100B", 100, "100"},
		{"0", 0, "0"},
	} {
		var b byteSize
		if err := b.Set(tt.in); err != nil || int64(b) != tt.want || b.String() != tt.str {
			t.Errorf("Set(%q) = %d (%s), %v; want %d (%s)", tt.in, b, b.String(), err, tt.want, tt.str)
		}
	}
	for _, bad := range []string{"", "-1", "MiB", "64m", "0.5", "1.1Ki", "99999999999GiB", "1Ei", "1e99", "0x10", "1/2", "+5", "5 M B", "1e1000000000"} {
		var b byteSize
		if err := b.Set(bad); err == nil {
			t.Errorf("Set(%q) = %d, want an error", bad, b)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a concurrent reader;
// waitContains lets the reader wait for a write instead of polling.
type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{} // a token after each write, once a reader waits
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if b.wrote != nil {
		select {
		case b.wrote <- struct{}{}:
		default: // a token is already pending: the reader rechecks anyway
		}
	}
	return n, err
}

// waitContains waits until the buffer contains sub, woken by each write;
// it reports false if within passes first. within only bounds a failure.
func (b *syncBuffer) waitContains(sub string, within time.Duration) bool {
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		b.mu.Lock()
		if strings.Contains(b.buf.String(), sub) {
			b.mu.Unlock()
			return true
		}
		if b.wrote == nil {
			b.wrote = make(chan struct{}, 1)
		}
		wrote := b.wrote
		b.mu.Unlock()
		select {
		case <-wrote:
		case <-timer.C:
			return false
		}
	}
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestDemo runs the demo on free ports, pastes its first curl command
// (as an HTTP request) and stops it like Ctrl-C would.
func TestDemo(t *testing.T) {
	demo := startDemo(t, "127.0.0.1:0")
	out := demo.out
	m := regexp.MustCompile(`curl -d '([^']*)' -X POST (http://\S+:predict)`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(m[2], "/v1/models/half_plus_two:predict") {
		t.Fatalf("no half_plus_two curl command first in:\n%s", out)
	}
	resp, err := http.Post(m[2], "application/x-www-form-urlencoded", strings.NewReader(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"
	if resp.StatusCode != 200 || string(body) != want {
		t.Errorf("half_plus_two through the demo = %d %q, want 200 %q", resp.StatusCode, body, want)
	}
	// The README's classify and regress examples, as the demo prints them.
	for verb, want := range map[string]string{
		"classify": "{\n    \"results\": [[[\"negative\", 0.5], [\"positive\", 0.5]], [[\"negative\", 0.119202919], [\"positive\", 0.880797088]]\n    ]\n}",
		"regress":  "{\n    \"results\": [5.0, 8.0]\n}",
	} {
		m := regexp.MustCompile(`curl -d '([^']*)' -X POST (http://\S+:` + verb + `)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no :%s curl command in:\n%s", verb, out)
		}
		resp, err := http.Post(m[2], "application/x-www-form-urlencoded", strings.NewReader(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != want {
			t.Errorf(":%s through the demo = %d %q, want 200 %q", verb, resp.StatusCode, body, want)
		}
	}
	metrics := regexp.MustCompile(`(http://\S+)/metrics`).FindStringSubmatch(out)
	if metrics == nil {
		t.Fatalf("no metrics address in:\n%s", out)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		r, err := http.Get(metrics[1] + path)
		if err != nil || r.StatusCode != 200 {
			t.Errorf("GET %s = %v, %v", path, r, err)
		}
		if r != nil {
			r.Body.Close()
		}
	}

	if code := demo.stop(); code != 0 {
		t.Errorf("demo exit code after Ctrl-C = %d", code)
	}
}
