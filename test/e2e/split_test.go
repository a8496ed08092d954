package e2e

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/mocktf"
	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
)

// tfServer is the TF Serving server of a split stack: the mock's TF face
// (internal/mocktf, tfsbridge's translation in front of a mock v2
// server), behind a handler that counts what reaches it and checks that
// it is the client's request, untranslated.
type tfServer struct {
	srv      *httptest.Server
	predicts atomic.Int64 // POST /v1/models/…:predict received
	// foreign counts requests that are not TF Serving REST calls (a
	// translated v2 request would be one), changed counts predict
	// bodies that are not the one the test sends.
	foreign, changed atomic.Int64
}

// splitBody is the predict body the split tests send, and splitAnswer
// what TF Serving answers to it (through either server).
const (
	splitBody   = `{"instances": [1.0, 2.0, 5.0]}`
	splitAnswer = "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"
)

// startTFServing starts the TF Serving server when the stack asks for one.
func (s *stack) startTFServing(t testing.TB) {
	if !s.cfg.TFServing {
		return
	}
	mock, err := mockv2.New(mockv2.Options{Kind: triton})
	if err != nil {
		t.Fatal(err)
	}
	v2 := httptest.NewServer(mock)
	t.Cleanup(v2.Close)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mocktf.Serve(ctx, lis, mocktf.Options{V2URL: v2.URL, Kind: triton}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("TF Serving mock: %v", err)
		}
	})
	face := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: lis.Addr().String()})
	tf := &tfServer{}
	tf.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !strings.HasPrefix(r.URL.Path, "/v1/models/"):
			tf.foreign.Add(1)
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, ":predict"):
			tf.predicts.Add(1)
			body, err := io.ReadAll(r.Body)
			if err != nil || strings.Contains(r.URL.Path, "/half_plus_two") && string(body) != splitBody {
				tf.changed.Add(1)
			}
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			r.ContentLength = int64(len(body))
		}
		face.ServeHTTP(w, r)
	}))
	t.Cleanup(tf.srv.Close)
	s.tfs = tf
}

// splitMap shares half_plus_two 90/10 between TF Serving and a v2 server,
// sticky on x-user-id; simple lives on TF Serving alone.
const splitMap = `
servers:
  tfs:    {url: "{{tfserving}}", kind: tfserving}
  second: {url: "{{second}}", kind: mlserver, bearer_token_file: "{{token}}"}
models:
  half_plus_two:
    split: {tfs: 90, second: 10}
    split_key: x-user-id
  simple:
    server: tfs
`

// binomialBound is how far from n·p the count of one side of n weighted
// draws may land in a test: 4.5 standard deviations of the binomial,
// which a fair split exceeds about once in 150,000 runs. For 1,000
// requests at 10% it is ±42.7 around 100.
func binomialBound(n int, p float64) float64 { return 4.5 * math.Sqrt(float64(n)*p*(1-p)) }

// served returns where the stack's split traffic went so far: TF Serving
// predicts, second's infers.
func (s *stack) served() (tfs, second int64) { return s.tfs.predicts.Load(), s.second.infers.Load() }

// splitCount is tfsbridge_split_requests_total{model, server}.
func (s *stack) splitCount(model, server string) float64 {
	return s.bridge.Metrics.Value("tfsbridge_split_requests_total", "model", model, "server", server)
}

// sendMany sends n split requests through via from 8 clients and fails
// the test on any answer that is not TF Serving's 200.
func (s *stack) sendMany(t *testing.T, via string, n int) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				r, err := send(context.Background(), s.client, s.url(via), request{path: "/v1/models/half_plus_two:predict", body: splitBody})
				if err != nil || r.status != 200 || string(r.body) != splitAnswer {
					t.Errorf("via %s: %v %d %q", via, err, r.status, r.body)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestSplit(t *testing.T) {
	s := newStack(t, stackConfig{ModelMap: splitMap, SecondKind: mlserver, TFServing: true})
	m, err := modelmap.Parse([]byte(s.expandMap(splitMap)))
	if err != nil {
		t.Fatal(err)
	}
	split := m.Model("half_plus_two").Split
	for _, via := range transports {
		t.Run(via, func(t *testing.T) {
			t.Run("90/10 over 1000 requests", func(t *testing.T) {
				const n = 1000
				tfs0, second0 := s.served()
				count0 := s.splitCount("half_plus_two", "second")
				s.sendMany(t, via, n)
				tfs1, second1 := s.served()
				tfs, second := tfs1-tfs0, second1-second0
				if tfs+second != n {
					t.Fatalf("served %d by TF Serving + %d by second, want %d in all", tfs, second, n)
				}
				if d := math.Abs(float64(second) - 0.1*n); d > binomialBound(n, 0.1) {
					t.Errorf("second got %d of %d, want 100 ± %.1f", second, n, binomialBound(n, 0.1))
				}
				if got := s.splitCount("half_plus_two", "second") - count0; got != float64(second) {
					t.Errorf("tfsbridge_split_requests_total{server=second} grew by %v, second served %d", got, second)
				}
				t.Logf("via %s: TF Serving %d, second %d", via, tfs, second)
			})
			t.Run("sticky per key", func(t *testing.T) {
				for i := range 60 {
					key := fmt.Sprintf("user-%d", i)
					want := split.Pick(key)
					for range 3 {
						tfs0, second0 := s.served()
						r := s.do(t, via, request{path: "/v1/models/half_plus_two:predict", body: splitBody, header: map[string]string{"X-User-Id": key}})
						tfs1, second1 := s.served()
						got := "tfs"
						if second1 > second0 {
							got = "second"
						}
						if r.status != 200 || string(r.body) != splitAnswer || tfs1-tfs0+second1-second0 != 1 || got != want {
							t.Fatalf("%s: %d %q served by %s (tfs +%d, second +%d), want %s", key, r.status, r.body, got, tfs1-tfs0, second1-second0, want)
						}
					}
				}
			})
			t.Run("a TF Serving model is TF Serving's, status and metadata too", func(t *testing.T) {
				for _, rq := range []request{
					{path: "/v1/models/simple"},
					{path: "/v1/models/simple/metadata"},
					{path: "/v1/models/simple/versions/1"},
					{path: "/v1/models/simple/labels/nope"},
					{path: "/v1/models/simple:predict", body: `{"inputs": {"INPUT0": [[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]], "INPUT1": [[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]]}}`},
				} {
					got := s.do(t, via, rq)
					want, err := send(context.Background(), s.client, s.tfs.srv.URL, rq)
					if err != nil {
						t.Fatal(err)
					}
					if got.status != want.status || string(got.body) != string(want.body) {
						t.Errorf("%s: got %d %s\nwant TF Serving's %d %s", rq.path, got.status, got.body, want.status, want.body)
					}
				}
			})
		})
	}
	if f, c := s.tfs.foreign.Load(), s.tfs.changed.Load(); f != 0 || c != 0 {
		t.Errorf("TF Serving got %d requests that are not TF REST calls and %d changed bodies: the split translated its share", f, c)
	}
	if s.second.badAuth.Load() != 0 {
		t.Errorf("%d calls reached second without its bearer token", s.second.badAuth.Load())
	}
}

// TestSplitReload changes the weights from 90/10 to 10/90 while clients
// send through every transport: no exchange fails, and the traffic after
// the reload follows the new weights.
func TestSplitReload(t *testing.T) {
	s := newStack(t, stackConfig{ModelMap: splitMap, SecondKind: mlserver, TFServing: true})
	reloads := func() float64 { return s.mapMetric(t, "tfsbridge_model_map_reloads_total", "success") }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var sent, failed atomic.Int64
	const workers = 6
	for i := range workers {
		wg.Go(func() {
			via := transports[i%len(transports)]
			for ctx.Err() == nil {
				r, err := send(context.Background(), s.client, s.url(via), request{path: "/v1/models/half_plus_two:predict", body: splitBody})
				sent.Add(1)
				if err != nil || r.status != 200 || string(r.body) != splitAnswer {
					failed.Add(1)
					t.Errorf("during the reload via %s: %v %d %q", via, err, r.status, r.body)
					return
				}
			}
		})
	}
	stop := func() {
		cancel()
		wg.Wait()
	}
	defer stop()
	// Generous: the machine running the tests may be busy; each wait
	// ends as soon as its event is seen.
	wait := func(cond func() bool, what string) {
		t.Helper()
		if !waitFor(60*time.Second, cond) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	wait(func() bool { return sent.Load() > 200 }, "traffic")
	s.writeMap(t, strings.Replace(splitMap, "{tfs: 90, second: 10}", "{tfs: 10, second: 90}", 1))
	wait(func() bool { return reloads() == 1 }, "the new weights")
	tfs0, second0 := s.served()
	const after = 600
	wait(func() bool {
		tfs, second := s.served()
		return tfs-tfs0+second-second0 >= after
	}, "traffic under the new weights")
	stop()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d exchanges failed across the reload", failed.Load(), sent.Load())
	}
	tfs1, second1 := s.served()
	n := tfs1 - tfs0 + second1 - second0
	// Up to one exchange per client was assigned before the reload and
	// served after it: the old weights may have sent those to TF Serving.
	if lo := 0.9*float64(n) - binomialBound(int(n), 0.9) - workers; float64(second1-second0) < lo {
		t.Errorf("after the reload second served %d of %d, want at least %.0f (90%%)", second1-second0, n, lo)
	}
	t.Logf("%d exchanges, none failed; after the reload: TF Serving %d, second %d", sent.Load(), tfs1-tfs0, second1-second0)
}
