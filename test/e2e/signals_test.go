package e2e

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
)

// gatedUpstream holds infer calls of model "slow" until released (or
// cancelled), in front of the mock.
type gatedUpstream struct {
	next    http.Handler
	started chan struct{}
	release chan struct{}
}

func (g *gatedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v2/models/slow/infer" {
		g.started <- struct{}{}
		select {
		case <-g.release:
		case <-r.Context().Done():
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// TestBinarySignals runs the real binary: SIGHUP reloads (logged) without
// harming a request in flight, and a request still running when SIGTERM's
// --shutdown-timeout expires is answered TF's 503, counted in the one
// "serving stopped" line, and makes the process exit 1.
func TestBinarySignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the tfsbridge binary")
	}
	bin := buildTfsbridge(t)
	mock, err := mockv2.New(mockv2.Options{Kind: triton, Delay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	up := &gatedUpstream{next: mock, started: make(chan struct{}, 4), release: make(chan struct{})}
	v2 := httptest.NewServer(up)
	t.Cleanup(v2.Close)
	t.Cleanup(func() { close(up.release) })

	cmd := exec.Command(bin, "proxy", "--backend", v2.URL, "--backend-kind", "triton",
		"--http-addr", "127.0.0.1:0", "--metrics-addr", "", "--shutdown-timeout", "300ms", "--drain-delay", "0",
		"--log-level", "info")
	var stdout, stderr syncBuffer
	exited := startBinary(t, cmd, &stdout, &stderr)
	// Generous deadlines throughout: a busy machine must not fail the
	// test, and each wait ends as soon as its event is seen.
	const within = 30 * time.Second
	var addr string
	if !waitFor(within, func() bool {
		m := regexp.MustCompile(`tfsbridge proxy serving.* http_addr=(\S+)`).FindStringSubmatch(stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}) {
		t.Fatal("the proxy did not start")
	}
	slow := request{path: "/v1/models/slow:predict", body: `{"instances": [1.0]}`}
	async := func() <-chan response {
		c := make(chan response, 1)
		go func() {
			resp, err := send(context.Background(), http.DefaultClient, "http://"+addr, slow)
			if err != nil {
				resp = response{status: -1, body: []byte(err.Error())}
			}
			c <- resp
		}()
		return c
	}

	// SIGHUP: logged, nothing cut, the process goes on.
	first := async()
	<-up.started
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !waitFor(within, func() bool { return strings.Contains(stderr.String(), "reload requested (SIGHUP)") }) {
		t.Fatal("SIGHUP was not logged")
	}
	up.release <- struct{}{}
	if r := <-first; r.status != http.StatusOK {
		t.Errorf("request in flight across SIGHUP: %d %s", r.status, r.body)
	}
	select {
	case err := <-exited:
		t.Fatalf("tfsbridge exited after SIGHUP: %v", err)
	default:
	}

	// SIGTERM with a request outlasting --shutdown-timeout.
	second := async()
	<-up.started
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := <-second
	if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), `"error": "tfsbridge is shutting down`) {
		t.Errorf("request cut by the shutdown: %d %s, want TF's 503", r.status, r.body)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("exit: %v, want status 1 (an exchange was cut)", err)
		}
	case <-time.After(within):
		t.Fatal("tfsbridge still running after SIGTERM")
	}
	out := stderr.String()
	if !regexp.MustCompile(`serving stopped.* drained=0 cut=1`).MatchString(out) {
		t.Errorf("no 'serving stopped ... cut=1' line:\n%s", out)
	}
}
