package comparerun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/bridge"
)

// Endpoint is one side of a comparison: a TF Serving REST base URL
// ("tf:URL"), or a v2 server ("v2:URL[,kind=KIND][,map=FILE]") reached
// through tfsbridge's translation run in-process, with a model map when
// the TF names are not the v2 server's.
type Endpoint struct {
	Spec string // as given, for reports
	V2   bool
	URL  string
	Kind string // v2 only: auto, triton, kserve or mlserver
	Map  string // v2 only: a model map file (see --model-map)
}

// ParseEndpoint parses "tf:URL" or "v2:URL[,kind=KIND][,map=FILE]".
func ParseEndpoint(s string) (Endpoint, error) {
	scheme, rest, ok := strings.Cut(s, ":")
	e := Endpoint{Spec: s, Kind: backend.KindAuto}
	switch {
	case !ok:
		return e, fmt.Errorf("endpoint %q: want tf:URL or v2:URL[,kind=triton|kserve|mlserver]", s)
	case scheme == "tf":
	case scheme == "v2":
		e.V2 = true
		var opts string
		rest, opts, _ = strings.Cut(rest, ",")
		for opt := range strings.SplitSeq(opts, ",") {
			if opt == "" {
				continue
			}
			k, v, _ := strings.Cut(opt, "=")
			switch {
			case k == "kind" && validKind(v):
				e.Kind = v
			case k == "map" && v != "":
				e.Map = v
			default:
				return e, fmt.Errorf("endpoint %q: unknown option %q: want kind=auto|triton|kserve|mlserver or map=FILE", s, opt)
			}
		}
	default:
		return e, fmt.Errorf("endpoint %q: unknown kind %q: want tf:URL or v2:URL[,kind=...][,map=FILE]", s, scheme)
	}
	u, err := url.Parse(rest)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return e, fmt.Errorf("endpoint %q: want an http:// or https:// URL without a query, such as tf:http://127.0.0.1:8501", s)
	}
	e.URL = strings.TrimRight(rest, "/")
	return e, nil
}

func validKind(k string) bool {
	switch k {
	case backend.KindAuto, "triton", "kserve", "mlserver":
		return true
	}
	return false
}

// Start returns a TF REST base URL for e: its own for tf:, else that of a
// tfsbridge proxy started on a loopback port in front of the v2 server,
// served until ctx is done. stop stops it and waits.
func (e Endpoint) Start(ctx context.Context, log *slog.Logger, maxBody int64) (base string, stop func(), err error) {
	if !e.V2 {
		return e.URL, func() {}, nil
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	o := bridge.DefaultOptions()
	o.BackendURL, o.BackendKind, o.Logger, o.ModelMapFile = e.URL, e.Kind, log, e.Map
	o.DrainDelay = 0
	if maxBody > 0 {
		o.MaxBodyBytes = maxBody
		o.MaxInflightBytes = max(o.MaxInflightBytes, 64*maxBody)
	}
	// tfsbridge answers 503 for a v2 server it cannot reach, as it must
	// for clients; here that would be compared as a model's answer. A
	// server that does not answer at all stops the run at once, as a tf:
	// endpoint does.
	if err := probe(ctx, e.URL+"/v2/health/live"); err != nil {
		return "", nil, fmt.Errorf("endpoint %s: %w", e.Spec, err)
	}
	b, err := bridge.New(o)
	if err != nil {
		return "", nil, fmt.Errorf("endpoint %s: %w", e.Spec, err)
	}
	l, err := bridge.Listen(bridge.Addrs{Proxy: "127.0.0.1:0"})
	if err != nil {
		return "", nil, fmt.Errorf("endpoint %s: %w", e.Spec, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, l) }()
	stop = func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("compare: in-process tfsbridge stopped with an error", "endpoint", e.Spec, "err", err)
		}
	}
	return "http://" + l.Proxy.Addr().String(), stop, nil
}

// probeTimeout bounds the reachability check of a v2 server.
const probeTimeout = 10 * time.Second

// probe checks that url answers HTTP at all (any status).
func probe(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return resp.Body.Close()
}
