package robustness

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/poll"
	"github.com/tfsbridge/tfsbridge/internal/racebuild"
	"github.com/tfsbridge/tfsbridge/proxy/admission"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// metricReader reads one counter or gauge: the stack's *observe.Metrics.
type metricReader interface {
	Value(name string, labelPairs ...string) float64
}

// memorySize is the body size of the amplification cases: large enough
// that fixed costs vanish, small enough for a shared test machine.
const memorySize = 16 << 20

// sigBytesY answers BYTES under the plain name y (printed as strings).
var sigBytesY = &tensor.Signature{Model: "m", Batched: true,
	Inputs:  []tensor.Spec{{Name: "x", DataType: tensor.FP32, Shape: []int64{-1}}},
	Outputs: []tensor.Spec{{Name: "y", DataType: tensor.Bytes, Shape: []int64{-1}}}}

// fill repeats unit between head and tail up to about size bytes.
func fill(head, unit, tail string, size int) []byte {
	n := (size - len(head) - len(tail)) / len(unit)
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(head)
	b.WriteString(strings.Repeat(unit, n))
	b.Truncate(b.Len() - 1) // the last separator
	b.WriteString(tail)
	return b.Bytes()
}

// amplificationCase is one body of issue 13's memory measurements.
type amplificationCase struct {
	name   string
	body   []byte
	factor int64 // the admission factor that must cover its peak
	run    func(body []byte) error
	err    string // what the error must contain; "" for none
}

func amplificationCases() []amplificationCase {
	zeros := fill(`{"instances": [`, "0,", `]}`, memorySize)
	request := func(kind oip.ServerKind) func([]byte) error {
		return func(b []byte) error {
			_, _, err := predictPipeline.Request(b, resolverFor(sigFloat), translate.RequestOptions{Kind: kind})
			return err
		}
	}
	response := func(sig *tensor.Signature, hl int) func([]byte) error {
		return func(b []byte) error {
			// The output cap the session sets with a body limit of memorySize.
			lim := tensor.Limits{MaxOutputBytes: session.OutputExpansion * memorySize}
			_, err := predictPipeline.Response(b, hl, translate.Exchange{Format: tfjson.Columnar, Signature: sig}, lim)
			return err
		}
	}
	// One-byte strings, each printed as "\u0000" on a line of its own.
	n := memorySize / 5
	h := fmt.Sprintf(`{"outputs":[{"name":"y","datatype":"BYTES","shape":[%d],"parameters":{"binary_data_size":%d}}]}`, n, 5*n)
	strs := append([]byte(h), bytes.Repeat([]byte{1, 0, 0, 0, 0}, n)...)
	m := memorySize / 2
	jsonData := []byte(fmt.Sprintf(`{"outputs":[{"name":"y","datatype":"FP32","shape":[%d],"data":[`, m) + strings.Repeat("0,", m-1) + `0]}]}`)
	meta := fill(`{"name":"m","versions":["1"],"platform":"p","inputs":[{"name":"x","datatype":"FP32","shape":[`, "-1,",
		`]}],"outputs":[{"name":"y","datatype":"FP32","shape":[-1]}]}`, memorySize)
	return []amplificationCase{
		{"request to binary v2", zeros, admission.RequestFactor, request(oip.Triton), ""},
		{"request to JSON v2", zeros, admission.RequestFactor, request(oip.KServe), ""},
		{"binary BYTES answer", strs, admission.ResponseFactor, response(sigBytesY, len(h)), ""},
		{"JSON answer", jsonData, admission.ResponseFactor, response(sigFloat, -1), ""},
		{"metadata", meta, admission.ResponseFactor, func(b []byte) error {
			sig, err := oip.ParseModelMetadata(b)
			if err != nil {
				return err
			}
			_ = tfresponse.Metadata(nil, sig, "1")
			return nil
		}, "5592355 dimensions in all, more than the limit of 65536"},
	}
}

// TestMemoryAmplification measures the heap high-water mark of the bodies
// issue 13 found amplified (a 64 MiB request peaked at 1.17 GiB, a 48 MiB
// BYTES answer at 2.6 GiB, 15 MiB of metadata at 1.8 GiB) and holds each
// within the admission factor that --max-inflight-bytes reserves for it.
func TestMemoryAmplification(t *testing.T) {
	if racebuild.Enabled {
		t.Skip("heap measurement under -race")
	}
	for _, c := range amplificationCases() {
		t.Run(c.name, func(t *testing.T) {
			var err error
			peak := heapPeak(func() { err = c.run(c.body) })
			ratio := float64(peak) / float64(len(c.body))
			t.Logf("%d-byte body: peak heap %d bytes (%.1f×), error %v", len(c.body), peak, ratio, err)
			if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
				t.Errorf("error %v, want %q", err, c.err)
			}
			if limit := uint64(c.factor) * uint64(len(c.body)); peak > limit {
				t.Errorf("peak heap %d bytes (%.1f× the body), over the admission factor %d×", peak, ratio, c.factor)
			}
		})
	}
}

// TestAdmissionBudget: over --max-inflight-bytes, a new buffered TF
// request gets TF's 503 while others hold the budget and a streamed one
// waits for the older holder, a body that could never fit is told so at
// once, and everything reserved is returned when the exchanges end.
func TestAdmissionBudget(t *testing.T) {
	h := startHostile(t)
	body := func(size int) []byte { return fill(`{"instances": [`, "1.0,", `]}`, size) }
	holder, small, huge := body(150<<10), body(60<<10), body(250<<10)
	const busy = "tfsbridge is over its in-flight memory budget (--max-inflight-bytes); retry later: this body needs "
	for _, via := range transports {
		// What a body reserves per byte: the proxy parses it as it
		// streams in, buffered ext_proc holds it whole; the budget
		// scales with it.
		factor := int64(admission.RequestFactor)
		if streams(via) {
			factor = admission.StreamFactor
		}
		budget := int64(4<<20) * factor / admission.RequestFactor
		// The streamed small body waits for the holder within its body
		// deadline: a generous one, so that the holder's 504 (after the
		// short request timeout) always comes first on a loaded machine.
		s := newStack(t, stackConfig{upstream: h.URL(), maxInflight: budget, readTimeout: 30 * time.Second})
		holds := int64(len(holder)) * factor
		// A request that holds most of the budget while the v2 server
		// takes its time (until the route or request timeout: 504).
		done := make(chan answer, 1)
		go func() { done <- s.post(via, "/v1/models/slow_headers:predict", holder) }()
		if !poll.Until(answerDeadline, func() bool { return s.metrics.Value("tfsbridge_inflight_bytes") >= float64(holds) }) {
			t.Fatalf("via %s: the holder's %d bytes never held (tfsbridge_inflight_bytes = %v)", via, holds, s.metrics.Value("tfsbridge_inflight_bytes"))
		}
		rejections := 2.0
		if streams(via) {
			// A streamed body is admitted with its first bytes; when it
			// needs more than is left it waits for the older holder to
			// finish (package admission's age rule), then completes.
			rejections = 1
			checkAnswer(t, "small while held via "+via, s.post(via, "/v1/models/good:predict", small), 200, "")
		} else {
			// A buffered body needs all its reservation at once: a
			// newcomer that does not fit is refused, never queued.
			checkAnswer(t, "small while held via "+via, s.post(via, "/v1/models/good:predict", small), 503, busy)
		}
		if a := <-done; a.err != nil || a.status != 504 {
			t.Errorf("holder via %s: %d %v, want 504", via, a.status, a.err)
		}
		// The holder's side stream ends a moment after its client got
		// Envoy's 504: its reservation goes with it.
		if !poll.Until(answerDeadline, func() bool { return s.metrics.Value("tfsbridge_inflight_bytes") == 0 }) {
			t.Fatalf("via %s: tfsbridge_inflight_bytes = %v after the holder's answer, want 0", via, s.metrics.Value("tfsbridge_inflight_bytes"))
		}
		checkAnswer(t, "small once free via "+via, s.post(via, "/v1/models/good:predict", small), 200, "")
		checkAnswer(t, "huge via "+via, s.post(via, "/v1/models/good:predict", huge), 503,
			fmt.Sprintf("%s%d bytes of working memory, more than the whole in-flight budget of %d bytes", busy, int64(len(huge))*factor, budget))
		if got := s.metrics.Value("tfsbridge_admission_rejections_total"); got != rejections {
			t.Errorf("via %s: tfsbridge_admission_rejections_total = %v, want %v", via, got, rejections)
		}
		poll.Until(answerDeadline, func() bool { return s.metrics.Value("tfsbridge_inflight_bytes") == 0 })
		if got := s.metrics.Value("tfsbridge_inflight_bytes"); got != 0 {
			t.Errorf("via %s: tfsbridge_inflight_bytes = %v after every exchange ended, want 0", via, got)
		}
	}
}

// heldFromOS returns the heap memory the process holds from the OS:
// objects, fragmentation and free spans not yet returned.
func heldFromOS() uint64 {
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64() + s[2].Value.Uint64()
}

// TestMemoryReturnedAfterBurst: once a burst of large requests has drained
// the in-flight budget, the heap it grew is returned to the OS soon (about
// a second), instead of staying until the next collection (which an idle
// process runs every two minutes). The baseline is the same burst with a
// budget so large that the burst does not count as one, a second after it.
// The budget case polls until the heap is returned: on a busy machine the
// return can come seconds late, and the wait ends as soon as it comes.
func TestMemoryReturnedAfterBurst(t *testing.T) {
	if racebuild.Enabled || testing.Short() {
		t.Skip("heap measurement")
	}
	h := startHostile(t)
	body := fill(`{"instances": [`, "1.0,", `]}`, 8<<20)
	held := map[string]uint64{}
	for _, c := range []struct {
		name   string
		budget int64
	}{
		{"baseline", 1 << 40},
		{"budget", 128 << 20}, // the streamed burst reserves 4 × 16 MiB, over an eighth
	} {
		// Streamed, the read deadline covers the translation too: four
		// 8 MiB bodies at once on a busy machine need more than a second.
		s := newStack(t, stackConfig{upstream: h.URL(), maxBody: 16 << 20, maxInflight: c.budget, readTimeout: 30 * time.Second, requestTimeout: 30 * time.Second,
			backendTimeout: 30 * time.Second})
		before := heapInUse()
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// No time bound here (checkAnswer's is for hangs): four
				// 8 MiB translations at once may take seconds on a busy
				// machine, and this test is about memory.
				if a := s.post(viaProxy, "/v1/models/good:predict", body); a.err != nil || a.status != 200 {
					t.Errorf("%s: %d %v %.200q", c.name, a.status, a.err, a.body)
				}
			}()
		}
		wg.Wait()
		end := time.Now()
		if c.name == "baseline" {
			// the behaviour under test: the baseline's heap a second after
			// the burst (nothing returns it: this only matches the budget
			// case's second), not a wait for an event.
			time.Sleep(time.Second)
			held[c.name] = heldFromOS()
		} else {
			limit := min(64<<20, held["baseline"]/2)
			_ = waitFor(settleTimeout-time.Since(end), func() bool { held[c.name] = heldFromOS(); return held[c.name] <= limit })
		}
		t.Logf("%s: heap held from the OS %d MiB %v after the burst (live heap before %d MiB)", c.name, held[c.name]>>20, time.Since(end).Round(time.Millisecond), before>>20)
		s.close()
		heapInUse()
		debug.FreeOSMemory() // the next case starts from a returned heap
	}
	if held["budget"] > 64<<20 || held["budget"] > held["baseline"]/2 {
		t.Errorf("held %d MiB after the burst, baseline %d MiB: want at most 64 MiB and half the baseline", held["budget"]>>20, held["baseline"]>>20)
	}
}
