// Package backend is tfsbridge's client for the v2 inference server's
// control calls: server kind detection (GET /v2), model metadata turned
// into a signature (GET /v2/models/{m}[/versions/{v}], plus Triton's
// /config for max_batch_size), model readiness and server health.
//
// Signatures are cached with a TTL; concurrent misses share one fetch;
// failures are cached only briefly. Every error returned is an
// *apierr.Error carrying the text a TF Serving client would get.
package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/tracing"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Defaults for Config fields left zero.
const (
	DefaultTimeout          = 5 * time.Second
	DefaultMetadataTTL      = 30 * time.Second
	DefaultErrorTTL         = time.Second
	DefaultMaxCacheEntries  = 1024
	DefaultMaxMetadataBytes = 16 << 20
	// kindTTL: the server kind cannot change without the server being
	// replaced; re-detect now and then anyway in case it was.
	kindTTL = time.Hour
)

// KindAuto asks the client to detect the server kind with GET /v2.
const KindAuto = "auto"

// maxCachedName bounds the model names whose signatures (or failures) are
// cached. Real model names are file or Kubernetes names, at most 255
// bytes; longer ones come from hostile URLs, and caching their failures
// let 200 requests with 256 KiB names pin 270 MB (each name is kept in the
// key and in the error text, until MaxCacheEntries accumulate). They are
// looked up every time instead, which costs the v2 server one call per
// request, as a cache miss does.
const maxCachedName = 255

// Config configures a Client.
type Config struct {
	// BaseURL is the v2 server's root, e.g. "http://127.0.0.1:8000".
	BaseURL string
	// Kind is "auto" (or "") to detect the server with GET /v2, else
	// "triton", "kserve" or "mlserver".
	Kind string
	// Timeout bounds each control call (metadata, config, ready, kind).
	Timeout time.Duration
	// MetadataTTL is how long a fetched signature is reused.
	MetadataTTL time.Duration
	// ErrorTTL is how long a failed fetch is remembered, so a missing
	// model or a down backend is not hammered by every request. Zero
	// means DefaultErrorTTL; negative means failures are not cached.
	ErrorTTL time.Duration
	// MaxCacheEntries caps the signature cache (keys come from URLs).
	MaxCacheEntries int
	// MaxMetadataBytes caps a metadata or config body.
	MaxMetadataBytes int64
	// Transport makes the HTTP calls; nil means NewTransport(Timeout).
	Transport http.RoundTripper
	// Metrics, when set, counts cache lookups and backend errors.
	Metrics *observe.Metrics
	// BearerTokenFile, when set, holds the token every call to this
	// server carries as "Authorization: Bearer …" (re-read on change).
	BearerTokenFile string
	// Server names this server in metrics and logs: its model-map name,
	// "" (observe.DefaultServer) for --backend.
	Server string
	// Logger receives the bearer token file's reload failures; nil
	// discards them.
	Logger *slog.Logger
}

// Client talks to one v2 server. It is safe for concurrent use.
type Client struct {
	cfg       Config
	base      string // BaseURL without a trailing slash
	baseURL   *url.URL
	http      *http.Client
	fixedKind bool
	kind      oip.ServerKind
	sigs      *cache[*tensor.Signature]
	kinds     *cache[oip.ServerKind]
	token     *tokenFile // nil without BearerTokenFile
}

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("backend URL %q: want http://host:port or https://host:port", cfg.BaseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("backend URL %q: must not have a query or fragment", cfg.BaseURL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MetadataTTL <= 0 {
		cfg.MetadataTTL = DefaultMetadataTTL
	}
	if cfg.ErrorTTL < 0 {
		cfg.ErrorTTL = 0
	} else if cfg.ErrorTTL == 0 {
		cfg.ErrorTTL = DefaultErrorTTL
	}
	if cfg.MaxCacheEntries <= 0 {
		cfg.MaxCacheEntries = DefaultMaxCacheEntries
	}
	if cfg.MaxMetadataBytes <= 0 {
		cfg.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	if cfg.Transport == nil {
		cfg.Transport = NewTransport(cfg.Timeout)
	}
	c := &Client{
		cfg:     cfg,
		base:    strings.TrimSuffix(u.String(), "/"),
		baseURL: u,
		http: &http.Client{Transport: cfg.Transport, Timeout: cfg.Timeout,
			// Never follow a redirect: the control calls go to the
			// configured server and nowhere else (get answers a 3xx with
			// a 502).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		sigs:  newCache[*tensor.Signature](cfg.MetadataTTL, cfg.ErrorTTL, cfg.MaxCacheEntries, time.Now),
		kinds: newCache[oip.ServerKind](kindTTL, cfg.ErrorTTL, 1, time.Now),
	}
	if cfg.BearerTokenFile != "" {
		c.token = newTokenFile(cfg.BearerTokenFile, c.ServerName(), cfg.Logger, cfg.Metrics)
	}
	if cfg.Kind != "" && cfg.Kind != KindAuto {
		k, err := oip.ParseServerKind(cfg.Kind)
		if err != nil {
			return nil, fmt.Errorf("backend kind: %w", err)
		}
		c.fixedKind, c.kind = true, k
	}
	return c, nil
}

// NewTransport returns the HTTP transport tfsbridge uses towards the v2
// server: bounded dials and header waits, a large idle pool (every
// inference is a request to the same host), and no environment proxy
// (the backend is a local sidecar or an in-cluster service).
func NewTransport(timeout time.Duration) *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ExpectContinueTimeout: time.Second,
	}
}

// ServerName returns the server's name in metrics and logs: its model-map
// name, or observe.DefaultServer.
func (c *Client) ServerName() string {
	if c.cfg.Server == "" {
		return observe.DefaultServer
	}
	return c.cfg.Server
}

// backendError counts a failed control call.
func (c *Client) backendError(kind string) { c.cfg.Metrics.BackendError(c.ServerName(), kind) }

// BaseURL returns a copy of the v2 server's root URL.
func (c *Client) BaseURL() *url.URL {
	u := *c.baseURL
	return &u
}

// Kind returns the server kind: the configured one, or the one detected
// from GET /v2 (cached).
func (c *Client) Kind(ctx context.Context) (oip.ServerKind, error) {
	if c.fixedKind {
		return c.kind, nil
	}
	k, _, err := c.kinds.get(ctx, "", c.cfg.Timeout, c.fetchKind)
	return k, asAPIError(err)
}

func (c *Client) fetchKind(ctx context.Context) (oip.ServerKind, error) {
	resp, err := c.get(ctx, "/v2")
	if err != nil {
		return 0, err
	}
	if resp.status != http.StatusOK {
		return 0, c.statusError(resp, nil)
	}
	k, err := oip.KindFromServerMetadata(resp.body)
	if err != nil {
		c.backendError(kindBadGateway)
		return 0, badGateway(err, "Unrecognized v2 inference server (GET /v2)")
	}
	return k, nil
}

// Signature returns the model signature for r's model (and version, when
// r has one), from the cache or from the server. A model the server does
// not know gives a NotFound *apierr.Error wrapping ErrModelNotFound, with
// TF's predict/metadata text "Servable not found for request: ...".
// The returned signature is shared: callers must not modify it.
func (c *Client) Signature(ctx context.Context, r route.Route) (*tensor.Signature, error) {
	r.Label = "" // v2 has no labels; callers resolve them first
	if err := unsafeModel(r); err != nil {
		return nil, err
	}
	if len(r.Model) > maxCachedName {
		fctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
		sig, err := c.fetchSignature(fctx, r)
		c.cfg.Metrics.CacheLookup(false)
		return sig, asAPIError(err)
	}
	key := r.Model
	if r.HasVersion {
		key += "\x00" + strconv.FormatInt(r.Version, 10)
	}
	if e, ok := c.sigs.lookup(key); ok {
		// The hit path, without get's fetch closure.
		c.cfg.Metrics.CacheLookup(true)
		return e.val, asAPIError(e.err)
	}
	sig, hit, err := c.sigs.get(ctx, key, c.cfg.Timeout, func(ctx context.Context) (*tensor.Signature, error) {
		return c.fetchSignature(ctx, r)
	})
	c.cfg.Metrics.CacheLookup(hit)
	return sig, asAPIError(err)
}

// unsafeModel refuses, without asking the server, a model whose name no
// v2 path can name safely ("..", "." and the like, see route.SafeSegment):
// behind a normalising hop its paths would reach another resource
// (/v2/models/../config is /v2/config). Such a name is no model's, so the
// answer is TF's for an unknown servable.
func unsafeModel(r route.Route) error {
	if r.V2Safe() {
		return nil
	}
	return apierr.Wrap(apierr.NotFound, fmt.Errorf("%w: name %q cannot be a v2 path segment", ErrModelNotFound, r.Model),
		"Servable not found for request: "+r.Servable())
}

// badGateway keeps the translate packages' own *apierr.Error (they say
// what was wrong with the answer) and wraps anything else as a 502.
func badGateway(err error, msg string) error {
	var e *apierr.Error
	if errors.As(err, &e) {
		return e
	}
	return apierr.Wrap(apierr.BadGateway, err, msg)
}

// asAPIError keeps *apierr.Error as is and maps anything else (a caller's
// own cancellation while waiting on a shared fetch) with TransportError.
func asAPIError(err error) error {
	if err == nil {
		return nil // before errors.As, whose target would escape: the hit path allocates nothing
	}
	var e *apierr.Error
	if errors.As(err, &e) {
		return err
	}
	return TransportError(err)
}

func (c *Client) fetchSignature(ctx context.Context, r route.Route) (*tensor.Signature, error) {
	kind, err := c.Kind(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := c.get(ctx, r.V2ModelPath())
	if err != nil {
		return nil, err
	}
	if resp.status != http.StatusOK {
		return nil, c.statusError(resp, &r)
	}
	sig, err := oip.ParseModelMetadata(resp.body)
	if err != nil {
		c.backendError(kindBadGateway)
		return nil, badGateway(err, "Invalid model metadata from the v2 inference server")
	}
	if kind == oip.Triton {
		// Only the model config tells a batching model's leading -1 from
		// a variable first dimension.
		resp, err := c.get(ctx, r.V2ConfigPath())
		if err != nil {
			return nil, err
		}
		if resp.status != http.StatusOK {
			return nil, c.statusError(resp, &r)
		}
		if err := oip.ApplyTritonConfig(sig, resp.body); err != nil {
			c.backendError(kindBadGateway)
			return nil, badGateway(err, "Invalid model configuration from the v2 inference server")
		}
	}
	if sig.Model == "" {
		sig.Model = r.Model
	}
	return sig, nil
}

// ModelReady reports whether the server says r's model (version) is
// ready. Not ready is (false, nil); an unknown model is a NotFound error
// wrapping ErrModelNotFound. Readiness is live state and is not cached.
func (c *Client) ModelReady(ctx context.Context, r route.Route) (bool, error) {
	r.Label = ""
	if err := unsafeModel(r); err != nil {
		return false, err
	}
	resp, err := c.get(ctx, r.V2ReadyPath())
	if err != nil {
		return false, err
	}
	switch {
	case resp.status >= 200 && resp.status < 300:
		return true, nil
	case resp.status == http.StatusBadRequest, resp.status == http.StatusServiceUnavailable:
		// Triton and MLServer say "not ready" with 400, KServe with 503.
		return false, nil
	}
	return false, c.statusError(resp, &r)
}

// Health returns nil when the server answers GET /v2/health/ready with a
// 2xx status. It backs /readyz.
func (c *Client) Health(ctx context.Context) error {
	resp, err := c.get(ctx, "/v2/health/ready")
	if err != nil {
		return err
	}
	if resp.status < 200 || resp.status >= 300 {
		return fmt.Errorf("v2 server not ready: GET /v2/health/ready answered %d", resp.status)
	}
	return nil
}

// response is a fully read control-call answer.
type response struct {
	status      int
	contentType string
	body        []byte
}

// get performs GET base+path and reads the body up to MaxMetadataBytes.
// Transport failures come back as TransportError's *apierr.Error.
func (c *Client) get(ctx context.Context, path string) (_ *response, err error) {
	ctx, done := c.startCall(ctx, path)
	defer func() { done(err) }()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "Invalid v2 request path")
	}
	req.Header.Set("Accept", "application/json")
	if tok, err := c.BearerToken(); err != nil {
		c.backendError(kindStatus)
		return nil, apierr.Wrap(apierr.Unavailable, err, "The v2 inference server's bearer token is unavailable")
	} else if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	tracing.Inject(ctx, req.Header)
	resp, err := c.http.Do(req)
	if err != nil {
		e, kind, _ := classify(err)
		c.backendError(kind)
		return nil, e
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxMetadataBytes+1))
	if err != nil {
		e, kind, _ := classify(err)
		c.backendError(kind)
		return nil, e
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// Whatever answers in the server's place must not send us, or
		// what we fetch for the client, elsewhere. The Location is not
		// shown: it may name internal hosts.
		c.backendError(kindBadGateway)
		return nil, apierr.Errorf(apierr.BadGateway,
			"v2 inference server answered GET %s with a redirect (HTTP %d); tfsbridge does not follow redirects", path, resp.StatusCode)
	}
	if int64(len(body)) > c.cfg.MaxMetadataBytes {
		c.backendError(kindBadGateway)
		return nil, apierr.Errorf(apierr.BadGateway, "v2 inference server answer to GET %s exceeds %d bytes", path, c.cfg.MaxMetadataBytes)
	}
	return &response{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: body}, nil
}

// statusError turns a non-2xx control-call answer into the TF error. A
// 404 for a model call (r != nil) is TF's "Servable not found" text; any
// other status keeps the v2 server's message and maps its status.
func (c *Client) statusError(resp *response, r *route.Route) error {
	msg := oip.DecodeError(resp.status, resp.contentType, resp.body)
	if r != nil && resp.status == http.StatusNotFound {
		c.backendError(kindNotFound)
		return apierr.Wrap(apierr.NotFound, fmt.Errorf("%w: %s", ErrModelNotFound, msg),
			"Servable not found for request: "+r.Servable())
	}
	c.backendError(kindStatus)
	return apierr.New(apierr.FromHTTPStatus(resp.status), msg)
}
