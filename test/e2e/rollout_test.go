package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRollingRestart terminates one of two tfsbridge pods while clients
// send predicts through the Envoy stand-in, as in a rollout: a load
// balancer that follows each pod's /readyz (the kubelet's probe and the
// endpoints controller) picks the pod of every request. With the drain
// delay, the terminated pod reports not ready but keeps serving until
// the balancer has moved away, then stops gracefully: no request fails.
func TestRollingRestart(t *testing.T) {
	// The delay is many probe periods even on a loaded machine.
	const drainDelay = 3 * time.Second
	old := newStack(t, stackConfig{DrainDelay: drainDelay})
	stays := newStack(t, stackConfig{BackendURL: old.v2URL, BackendKind: triton})
	pods := []*stack{old, stays}

	lb := newReadinessBalancer(t, pods)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent, failed atomic.Int64
	var servedBy [2]atomic.Int64
	var firstFailure atomic.Value
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				i, ok := lb.pick()
				if !ok {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, "no ready pod")
					continue
				}
				sent.Add(1)
				resp, err := send(context.Background(), pods[i].client, pods[i].env.URL(),
					request{path: "/v1/models/half_plus_two:predict", body: readmeBody})
				if err != nil || resp.status != http.StatusOK || string(resp.body) != readmeResponse {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("pod %d: %d %q %v", i, resp.status, resp.body, err))
					continue
				}
				servedBy[i].Add(1)
			}
		}()
	}
	mustWaitFor(t, "traffic on both pods", func() bool { return servedBy[0].Load() >= 20 && servedBy[1].Load() >= 20 })

	old.stopBridge() // SIGTERM
	<-old.bridgeDone
	afterStop := servedBy[1].Load()
	mustWaitFor(t, "traffic after the stop", func() bool { return servedBy[1].Load() >= afterStop+20 })
	close(stop)
	wg.Wait()
	lb.close()

	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d requests failed during the rollout; first: %v", n, sent.Load(), firstFailure.Load())
	}
	if !lb.sawNotReady(0) {
		t.Error("the terminated pod never reported not ready before it stopped")
	}
	t.Logf("%d requests: %d on the terminated pod, %d on the other", sent.Load(), servedBy[0].Load(), servedBy[1].Load())
}

// readinessBalancer picks, round robin, among the pods whose /readyz
// last answered 200, probing each every few milliseconds.
type readinessBalancer struct {
	ready    []atomic.Bool
	notReady []atomic.Bool // ever seen not ready after being ready
	next     atomic.Uint64
	stop     chan struct{}
	done     sync.WaitGroup
}

func newReadinessBalancer(t *testing.T, pods []*stack) *readinessBalancer {
	lb := &readinessBalancer{ready: make([]atomic.Bool, len(pods)), notReady: make([]atomic.Bool, len(pods)), stop: make(chan struct{})}
	for i, p := range pods {
		lb.done.Add(1)
		go func() {
			defer lb.done.Done()
			client := &http.Client{Timeout: 5 * time.Second}
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				resp, err := client.Get(p.adminURL + "/readyz")
				ok := err == nil && resp.StatusCode == http.StatusOK
				if err == nil {
					resp.Body.Close()
				}
				if !ok && lb.ready[i].Load() {
					lb.notReady[i].Store(true)
				}
				lb.ready[i].Store(ok)
				select {
				case <-lb.stop:
					return
				case <-tick.C:
				}
			}
		}()
	}
	mustWaitFor(t, "every pod ready", func() bool {
		for i := range lb.ready {
			if !lb.ready[i].Load() {
				return false
			}
		}
		return true
	})
	return lb
}

// pick returns the next ready pod.
func (lb *readinessBalancer) pick() (int, bool) {
	n := uint64(len(lb.ready))
	start := lb.next.Add(1)
	for k := uint64(0); k < n; k++ {
		if i := int((start + k) % n); lb.ready[i].Load() {
			return i, true
		}
	}
	return 0, false
}

func (lb *readinessBalancer) sawNotReady(i int) bool { return lb.notReady[i].Load() }

func (lb *readinessBalancer) close() {
	close(lb.stop)
	lb.done.Wait()
}

// mustWaitFor is waitFor with a minute, failing the test on timeout.
func mustWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !waitFor(time.Minute, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}
