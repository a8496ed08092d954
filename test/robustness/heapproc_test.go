package robustness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/racebuild"
	"github.com/tfsbridge/tfsbridge/proxy/bridge"
	"github.com/tfsbridge/tfsbridge/test/envoysim"
)

// A tfsbridge whose heap is measured alone runs in a child process: the
// test binary itself, started with heapChildEnv set, runs only
// TestHeapChild, which serves tfsbridge (ext_proc and the proxy) and
// answers its parent's commands on stdin, one a line:
//
//	mark  → collect twice, take the heap as the baseline, sample it from
//	        now on; answers "ok"
//	peak  → stop sampling; answers "peak N", the high-water mark of the
//	        heap's object bytes above the baseline
//
// The parent runs the client, the Envoy stand-in and the v2 server, so
// what they hold (the Envoy stand-in buffers a whole BUFFERED body, and
// encodes it again into its gRPC message) does not count: the figure is
// tfsbridge's own, as a deployment's tfsbridge container would show it.
const heapChildEnv = "TFSBRIDGE_HEAP_CHILD_UPSTREAM"

// TestHeapChild is the child process's body; it does nothing in a normal
// run.
func TestHeapChild(t *testing.T) {
	upstream := os.Getenv(heapChildEnv)
	if upstream == "" {
		t.Skip("only runs as heapChild's process")
	}
	o := bridge.DefaultOptions()
	o.BackendURL = upstream
	o.BackendKind = "triton"
	o.MaxBodyBytes = 96 << 20
	o.MaxInflightBytes = 1 << 32
	o.BackendTimeout = time.Minute
	o.ShutdownTimeout = time.Second
	o.DrainDelay = 0
	o.Proxy = bridge.ProxyOptions{RequestTimeout: time.Minute, ReadTimeout: time.Minute,
		ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute, WriteTimeout: time.Minute}
	b, err := bridge.New(o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := bridge.Listen(bridge.Addrs{Extproc: "127.0.0.1:0", Proxy: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, l) }()
	defer func() { cancel(); <-done }()
	fmt.Printf("addrs %s %s\n", l.Extproc.Addr(), l.Proxy.Addr())
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	var base uint64
	var stop chan struct{}
	var peak chan uint64
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "mark":
			runtime.GC()
			runtime.GC()
			base = read()
			stop, peak = make(chan struct{}), make(chan uint64)
			go func(stop chan struct{}, peak chan uint64) {
				p := base
				tk := time.NewTicker(50 * time.Microsecond)
				defer tk.Stop()
				for {
					p = max(p, read())
					select {
					case <-stop:
						peak <- max(p, read())
						return
					case <-tk.C:
					}
				}
			}(stop, peak)
			fmt.Println("ok")
		case "peak":
			close(stop)
			p := <-peak
			fmt.Printf("peak %d\n", p-min(p, base))
		}
	}
}

// heapChild is a running child process: tfsbridge with its ext_proc
// server behind two Envoy stand-ins (BUFFERED and full duplex) and its
// proxy, all to upstream.
type heapChild struct {
	cmd             *exec.Cmd
	in              io.WriteCloser
	out             *bufio.Scanner
	proxyURL        string
	env, envFD      *envoysim.Envoy
	client          *http.Client
	clientTransport *http.Transport
}

// startHeapChild starts the child, extra added to its environment.
func startHeapChild(t *testing.T, upstream string, extra ...string) *heapChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHeapChild$")
	cmd.Env = append(append(os.Environ(), heapChildEnv+"="+upstream), extra...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &heapChild{cmd: cmd, in: in, out: bufio.NewScanner(outPipe)}
	t.Cleanup(c.close)
	line := c.expect(t, "addrs ")
	f := strings.Fields(line)
	if len(f) != 3 {
		t.Fatalf("child said %q", line)
	}
	c.proxyURL = "http://" + f[2]
	c.env, err = envoysim.Start(envoysim.Config{ProcessorAddr: f[1], Upstream: upstream, Mode: envoysim.DefaultMode(),
		AllowModeOverride: true, MessageTimeout: time.Minute, BufferLimit: 128 << 20, UpstreamTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c.envFD, err = envoysim.Start(envoysim.Config{ProcessorAddr: f[1], Upstream: upstream, Mode: envoysim.FullDuplexMode(),
		UpstreamTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c.clientTransport = &http.Transport{Proxy: nil, DisableCompression: true}
	c.client = &http.Client{Transport: c.clientTransport, Timeout: 5 * time.Minute}
	return c
}

// expect reads the child's next line that starts with prefix (a test
// binary prints its own lines too) and returns it.
func (c *heapChild) expect(t *testing.T, prefix string) string {
	t.Helper()
	for c.out.Scan() {
		if l := c.out.Text(); strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("child ended without a %q line: %v", prefix, c.out.Err())
	return ""
}

// url is the base URL of transport via.
func (c *heapChild) url(via string) string {
	switch via {
	case viaProxy:
		return c.proxyURL
	case viaExtprocFD:
		return c.envFD.URL()
	}
	return c.env.URL()
}

// peak runs f and returns the child's peak heap growth meanwhile.
func (c *heapChild) peak(t *testing.T, f func()) uint64 {
	t.Helper()
	if _, err := io.WriteString(c.in, "mark\n"); err != nil {
		t.Fatal(err)
	}
	c.expect(t, "ok")
	f()
	if _, err := io.WriteString(c.in, "peak\n"); err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(c.expect(t, "peak "), "peak "), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (c *heapChild) close() {
	if c.clientTransport != nil {
		c.clientTransport.CloseIdleConnections()
	}
	for _, e := range []*envoysim.Envoy{c.env, c.envFD} {
		if e != nil {
			_ = e.Close()
		}
	}
	_ = c.in.Close() // the child ends at EOF
	_ = c.cmd.Wait()
}

// TestLargeRequestHeap sends a 64 MB TF JSON predict body (FP32 values
// written as "0.25,": 5 bytes of JSON for 4 bytes of tensor, a 51 MB
// tensor) through each transport and holds tfsbridge's peak heap growth,
// measured in its own process, to a multiple of the tensor: 3× in
// BUFFERED ext_proc (the whole body arrives as one gRPC message and leaves
// as another), 1.5× in full duplex and through the proxy (the JSON is
// never held, only the tensor it fills).
func TestLargeRequestHeap(t *testing.T) {
	if racebuild.Enabled || testing.Short() {
		t.Skip("heap measurement")
	}
	const values = 64 << 20 / 5
	tensorBytes := uint64(values * 4)
	h := startHostile(t)
	// The collector at its default pace whatever this run's environment
	// says: what a deployment's tfsbridge does.
	c := startHeapChild(t, h.URL(), "GOGC=100", "GOMEMLIMIT=off")
	for _, tc := range []struct {
		via   string
		bound float64
	}{
		{viaExtproc, 3},
		{viaExtprocFD, 1.5},
		{viaProxy, 1.5},
	} {
		t.Run(tc.via, func(t *testing.T) {
			body := &patternBody{head: []byte(`{"instances": [`), unit: []byte("0.25,"), tail: []byte(`0.5]}`), n: values - 1}
			size := body.Len()
			var status int
			var err error
			peak := c.peak(t, func() {
				req, _ := http.NewRequest("POST", c.url(tc.via)+"/v1/models/good:predict", body)
				req.ContentLength = size
				req.Header.Set("Content-Type", "application/json")
				var resp *http.Response
				if resp, err = c.client.Do(req); err == nil {
					status = resp.StatusCode
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
			ratio := float64(peak) / float64(tensorBytes)
			t.Logf("%d-byte JSON body, %d-byte tensor: tfsbridge's peak heap growth %d bytes (%.2f× the tensor)", size, tensorBytes, peak, ratio)
			if err != nil || status != 200 {
				t.Fatalf("answer %d %v", status, err)
			}
			if ratio > tc.bound {
				t.Errorf("peak heap growth %.2f× the tensor, over %.1f×", ratio, tc.bound)
			}
		})
	}
}
