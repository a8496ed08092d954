package comparerun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/tfsbridge/tfsbridge/translate/tfcompare"
)

// The defaults of Options' zero values.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultMaxBodyBytes = 64 << 20
)

// Options configure Run.
type Options struct {
	// A and B are the TF REST base URLs compared (A is the reference: the
	// relative error is relative to A's values). NameA and NameB name them
	// in the report.
	A, B         string
	NameA, NameB string
	Tolerance    tfcompare.Tolerance
	// Concurrency is how many requests are in flight at once (each sent
	// to both sides together).
	Concurrency int
	// Client sends the requests; its Timeout bounds each (nil: a client
	// with DefaultTimeout).
	Client *http.Client
	// MaxBodyBytes bounds each answer read (0: DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Progress, when set, is called after each request with the number
	// done and the total (from one goroutine at a time).
	Progress func(done, total int)
}

// Run replays every request against both sides and aggregates the
// comparisons. A request that reaches neither side's HTTP server (a
// connection refused, a timeout) stops the run with an error: it says
// nothing about the models.
func Run(ctx context.Context, reqs []Request, o Options) (*Report, error) {
	if o.Client == nil {
		o.Client = &http.Client{Timeout: DefaultTimeout}
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	rep := newReport(o)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan int)
	var (
		mu   sync.Mutex
		done int
		wg   sync.WaitGroup
	)
	for range max(o.Concurrency, 1) {
		wg.Go(func() {
			cmp := tfcompare.New(o.Tolerance)
			for i := range jobs {
				a, b, err := exchangeBoth(ctx, o, &reqs[i])
				if err != nil {
					cancel(err)
					continue
				}
				r := cmp.Compare(a, b)
				mu.Lock()
				rep.add(&reqs[i], r)
				done++
				if o.Progress != nil {
					o.Progress(done, len(reqs))
				}
				mu.Unlock()
			}
		})
	}
feed:
	for i := range reqs {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	rep.Elapsed = time.Since(rep.Started)
	rep.finish()
	return rep, nil
}

// exchangeBoth sends r to both sides at once.
func exchangeBoth(ctx context.Context, o Options, r *Request) (a, b tfcompare.Answer, err error) {
	body, err := r.body()
	if err != nil {
		return a, b, err
	}
	var errB error
	var wg sync.WaitGroup
	wg.Go(func() { b, errB = exchange(ctx, o, o.B, r, body) })
	a, err = exchange(ctx, o, o.A, r, body)
	wg.Wait()
	switch {
	case err != nil:
		return a, b, fmt.Errorf("%s: %w", o.NameA, err)
	case errB != nil:
		return a, b, fmt.Errorf("%s: %w", o.NameB, errB)
	}
	return a, b, nil
}

func exchange(ctx context.Context, o Options, base string, r *Request, body []byte) (tfcompare.Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+r.path(), bytes.NewReader(body))
	if err != nil {
		return tfcompare.Answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	status, body, err := do(o.Client, req, o.MaxBodyBytes)
	if err != nil {
		return tfcompare.Answer{}, fmt.Errorf("%s %s: %w", r.Model, r.Verb, err)
	}
	return tfcompare.Answer{Status: status, Body: body}, nil
}

// errTooLarge is an answer over the body limit.
var errTooLarge = errors.New("answer larger than the body limit (--max-body-bytes)")

// do sends req and reads at most limit bytes of its answer.
func do(c *http.Client, req *http.Request, limit int64) (int, []byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return 0, nil, err
	}
	if int64(len(body)) > limit {
		return 0, nil, errTooLarge
	}
	return resp.StatusCode, body, nil
}

// clipText is the start of an answer, for a message.
func clipText(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
