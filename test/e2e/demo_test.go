package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/test/envoysim"
)

// curlRequest is the request curl sends for the README's
//
//	curl -d '{"instances": [1.0, 2.0, 5.0]}' -X POST http://localhost:8501/v1/models/half_plus_two:predict
//
// byte for byte (curl 8): -d means a form Content-Type.
func curlRequest(host string) []byte {
	return []byte("POST /v1/models/half_plus_two:predict HTTP/1.1\r\n" +
		"Host: " + host + "\r\n" +
		"User-Agent: curl/8.5.0\r\n" +
		"Accept: */*\r\n" +
		"Content-Length: " + strconv.Itoa(len(readmeBody)) + "\r\n" +
		"Content-Type: application/x-www-form-urlencoded\r\n" +
		"\r\n" +
		readmeBody)
}

// rawCurl sends curlRequest to addr ("host:port") over a fresh TCP
// connection and reads the answer as curl would print it.
func rawCurl(t testing.TB, addr string, chunkedOK bool) response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(settleTimeout)) // a bound for a hang, not a speed test
	if _, err := conn.Write(curlRequest(addr)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if (resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) > 0) && !(chunkedOK && resp.ContentLength == -1) {
		t.Errorf("framing: Content-Length %d, Transfer-Encoding %q for %d body bytes", resp.ContentLength, resp.TransferEncoding, len(body))
	}
	return response{status: resp.StatusCode, body: body, header: resp.Header}
}

// hostPort strips the scheme of a base URL.
func hostPort(base string) string { return strings.TrimPrefix(base, "http://") }

// TestDemoPieces runs the demo's pieces in process — the mock, and the
// proxy and ext_proc server sharing one bridge in front of it, as
// "tfsbridge demo" wires them — and makes the README's curl request to
// the proxy and, through Envoy, to the ext_proc server.
func TestDemoPieces(t *testing.T) {
	s := newStack(t, stackConfig{})
	for _, via := range transports {
		t.Run(via, func(t *testing.T) {
			// Envoy drops content-length in full-duplex mode: the answer
			// goes out chunked.
			checkResponse(t, rawCurl(t, hostPort(s.url(via)), via == viaExtprocFD), ok(readmeResponse))
		})
	}
}

// TestDemoBinary builds tfsbridge, runs "tfsbridge demo" on ephemeral
// ports, waits for it to be ready, makes the README's request (with curl
// itself too when it is installed) directly and through Envoy, then stops
// it with SIGINT and expects a clean exit.
func TestDemoBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the tfsbridge binary")
	}
	bin := buildTfsbridge(t)
	cmd := exec.Command(bin, "demo",
		"--mock-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--grpc-addr", "127.0.0.1:0", "--mock-grpc-addr", "127.0.0.1:0", "--tf-grpc-addr", "127.0.0.1:0",
		"--mock-tf-addr", "127.0.0.1:0", "--mock-perturbed-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--log-level", "warn")
	var stdout, stderr syncBuffer
	exited := startBinary(t, cmd, &stdout, &stderr)

	// Generous: a fresh process on a busy machine can take many seconds
	// to start; the wait ends as soon as the banner is out.
	if !waitFor(time.Minute, func() bool { return strings.Contains(stdout.String(), "Press Ctrl-C to stop.") }) {
		t.Fatalf("demo did not print its banner")
	}
	out := stdout.String()
	addr := func(re string) string {
		m := regexp.MustCompile(re).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("demo output lacks %s:\n%s", re, out)
		}
		return m[1]
	}
	mock := addr(`mock v2 server \(triton\)\s+http://(\S+)`)
	proxy := addr(`TF Serving REST proxy\s+http://(\S+)`)
	grpc := addr(`Envoy ext_proc \(gRPC\)\s+(\S+)`)
	admin := addr(`metrics and health\s+http://(\S+)/metrics`)
	readmeCurl := `curl -d '{"instances": [1.0, 2.0, 5.0]}' -X POST http://` + proxy + `/v1/models/half_plus_two:predict`
	if !strings.Contains(out, readmeCurl) {
		t.Errorf("demo output lacks the README's request %q", readmeCurl)
	}

	client := newClient()
	defer client.CloseIdleConnections()
	if !waitFor(settleTimeout, func() bool {
		r, err := send(context.Background(), client, "http://"+admin, request{path: "/readyz"})
		return err == nil && r.status == http.StatusOK
	}) {
		t.Fatalf("demo never became ready")
	}

	checkResponse(t, rawCurl(t, proxy, false), ok(readmeResponse))
	if curl, err := exec.LookPath("curl"); err == nil {
		got, err := exec.Command(curl, "-sS", "-d", readmeBody, "-X", "POST", "http://"+proxy+"/v1/models/half_plus_two:predict").Output()
		if err != nil {
			t.Errorf("curl: %v", err)
		} else if string(got) != readmeResponse {
			t.Errorf("curl printed %q, want %q", got, readmeResponse)
		}
	} else {
		t.Log("curl not installed: only its request bytes were replayed")
	}

	// The migration block, pasted into a shell.
	pasteMigration(t, out, filepath.Dir(bin))

	// The demo's ext_proc server, behind Envoy, in front of its mock.
	env, err := envoysim.Start(envoysim.Config{ProcessorAddr: grpc, Upstream: "http://" + mock,
		AllowModeOverride: true, MessageTimeout: messageTimeout})
	if err != nil {
		t.Fatal(err)
	}
	checkResponse(t, rawCurl(t, hostPort(env.URL()), false), ok(readmeResponse))
	for _, v := range env.Violations() {
		t.Errorf("envoysim violation: %s", v)
	}
	if err := env.Close(); err != nil {
		t.Errorf("envoysim close: %v", err)
	}

	// Ctrl-C: a clean stop, exit code 0, promptly. The bound catches a
	// stop that hangs; on a busy machine even a prompt one can take
	// seconds, so it is generous (the log line shows the real time).
	start := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			t.Errorf("demo exited with %v after SIGINT", exit)
		case err != nil:
			t.Errorf("demo: %v", err)
		}
		t.Logf("demo stopped %v after SIGINT", time.Since(start).Round(time.Millisecond))
	case <-time.After(settleTimeout):
		_ = cmd.Process.Signal(syscall.SIGQUIT) // a goroutine dump on stderr
		t.Fatalf("demo still running %v after SIGINT", settleTimeout)
	}
	if _, err := net.DialTimeout("tcp", proxy, time.Second); err == nil {
		t.Errorf("the proxy still accepts connections after the demo exited")
	}
}

// pasteMigration runs each command of the demo's migration block (out is
// the demo's output) in sh, as a user pastes it, with binDir (the built
// tfsbridge) first on PATH, and checks what each prints: the split's
// counts within binomial bounds, one answer for one user, the shadow's
// mismatches (the converted answers against TF Serving's), and compare's exit 1 with the drifted output's row.
func pasteMigration(t *testing.T, out, binDir string) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Log("curl not installed: the migration block is checked in cmd/tfsbridge only")
		return
	}
	_, section, ok := strings.Cut(out, "\nMigration:")
	if !ok {
		t.Fatalf("no migration section in:\n%s", out)
	}
	section, _, _ = strings.Cut(section, "\ngRPC:")
	var cmds []string
	for line := range strings.Lines(section) {
		if c, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "  "); ok {
			cmds = append(cmds, c)
		}
	}
	if len(cmds) != 4 || !strings.HasPrefix(cmds[0], "for i in $(seq 200)") || !strings.Contains(cmds[1], "x-user-id: 42") ||
		!strings.Contains(cmds[2], "/metrics | grep tfsbridge_shadow_comparisons_total") || !strings.HasPrefix(cmds[3], "tfsbridge compare ") {
		t.Fatalf("want the split loop, the sticky loop, the metrics grep and compare in:\n%s", section)
	}
	sh := func(c string) (string, int) {
		cmd := exec.Command("sh", "-c", c)
		cmd.Env = append(cleanEnv(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("%s: %v", c, err)
		}
		if stderr.Len() > 0 {
			t.Logf("%s: stderr: %s", c, stderr.String())
		}
		return stdout.String(), cmd.ProcessState.ExitCode()
	}
	// uniq -c's lines, as answer → count.
	uniq := func(text string) map[string]int {
		counts := map[string]int{}
		for _, m := range regexp.MustCompile(`(?m)^\s*(\d+) (\S+)$`).FindAllStringSubmatch(text, -1) {
			counts[m[2]], _ = strconv.Atoi(m[1])
		}
		return counts
	}
	const tfAnswer, convertedAnswer = `{"predictions":[2.5]}`, `{"predictions":[2.501]}`
	// 200 requests split 90/10: the converted model's count is
	// binomial(200, 0.1), 20±4.2; 4.5 standard deviations either side.
	text, _ := sh(cmds[0])
	if c := uniq(text); len(c) != 2 || c[tfAnswer]+c[convertedAnswer] != 200 || c[convertedAnswer] < 1 || c[convertedAnswer] > 39 {
		t.Errorf("split loop printed:\n%s\nwant %s 1…39 times and %s the rest of 200", text, convertedAnswer, tfAnswer)
	}
	text, _ = sh(cmds[1])
	if c := uniq(text); len(c) != 1 || c[tfAnswer]+c[convertedAnswer] != 20 {
		t.Errorf("sticky loop printed:\n%s\nwant one answer 20 times", text)
	}
	// The shadow compares in the background: wait for its counter.
	mismatch := regexp.MustCompile(`(?m)^tfsbridge_shadow_comparisons_total\{model="half_plus_two_split",result="mismatch"\} [1-9]`)
	if !waitFor(settleTimeout, func() bool { text, _ = sh(cmds[2]); return mismatch.MatchString(text) }) {
		t.Errorf("the metrics grep never showed a shadow mismatch:\n%s", text)
	}
	text, code := sh(cmds[3])
	if code != 1 || !regexp.MustCompile(`(?m)^half_plus_two\s+outputs\s+float\s+50\s+0\s+0\s+50\s+0\.001\s`).MatchString(text) {
		t.Errorf("%s exited %d, printed:\n%s\nwant exit 1 and half_plus_two's drifted output (50 mismatches, max abs 0.001)", cmds[3], code, text)
	}
}

// buildTfsbridge builds ./cmd/tfsbridge into a temporary directory.
// startBinary starts cmd (a built tfsbridge) with a clean environment and
// its output in stdout and stderr, and returns the channel its exit error
// arrives on, once. Unless the test received from that channel, the cleanup
// kills the process; a failed test logs its output.
func startBinary(t *testing.T, cmd *exec.Cmd, stdout, stderr *syncBuffer) <-chan error {
	t.Helper()
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	wait := make(chan error, 1)
	go func() { wait <- cmd.Wait() }()
	// exited hands the exit to the test once and tells the cleanup so.
	exited := make(chan error)
	seen := make(chan struct{})
	go func() {
		err := <-wait
		select {
		case exited <- err:
			close(seen)
		case <-t.Context().Done():
		}
	}()
	t.Cleanup(func() {
		select {
		case <-seen:
		default:
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("tfsbridge stdout:\n%s\ntfsbridge stderr:\n%s", stdout.String(), stderr.String())
		}
	})
	return exited
}

func buildTfsbridge(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build tfsbridge: %v", err)
	}
	out := filepath.Join(t.TempDir(), "tfsbridge")
	build := exec.Command(goBin, "build", "-o", out, "github.com/tfsbridge/tfsbridge/cmd/tfsbridge")
	var msg bytes.Buffer
	build.Stdout, build.Stderr = &msg, &msg
	if err := build.Run(); err != nil {
		t.Fatalf("go build: %v\n%s", err, msg.String())
	}
	return out
}

// cleanEnv is the test's environment without TFSBRIDGE_* variables,
// which would change the demo's flags.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TFSBRIDGE_") {
			env = append(env, kv)
		}
	}
	return env
}
