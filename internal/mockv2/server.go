package mockv2

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Options configures a Server.
type Options struct {
	// Kind is the server imitated: "triton" (the default), "kserve" or
	// "mlserver".
	Kind string
	// Logger receives one debug record per request; nil discards them.
	Logger *slog.Logger
	// Delay is how long model "slow" waits before answering; zero means
	// DefaultDelay.
	Delay time.Duration
	// MaxBodyBytes caps a request body, before and after decompression;
	// zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Perturb adds, per model name, a delta to every floating-point
	// element the model outputs: a stand-in for a converted model whose
	// answers drift, for "tfsbridge compare" demos and tests.
	Perturb map[string]float64
}

const (
	// DefaultDelay is model "slow"'s wait when Options.Delay is zero.
	DefaultDelay = 2 * time.Second
	// DefaultMaxBodyBytes is the body cap when Options.MaxBodyBytes is
	// zero: Triton's default --http-max-input-size.
	DefaultMaxBodyBytes = 64 << 20

	// HeaderDelay makes any request wait the given Go duration (at most
	// MaxHeaderDelay) before it is handled.
	HeaderDelay = "X-Mock-Delay"
	// HeaderGarbage chooses how model "garbage" breaks its answer:
	// "truncated" (default), "ihcl", "json" or "empty".
	HeaderGarbage = "X-Mock-Garbage"
	// MaxHeaderDelay bounds HeaderDelay.
	MaxHeaderDelay = time.Minute
)

// kind is the server imitated.
type kind uint8

const (
	kindTriton kind = iota
	kindKServe
	kindMLServer
)

// Server is an http.Handler that answers the Open Inference Protocol v2 the
// way one real server does. It holds no per-request state and is safe for
// concurrent use.
type Server struct {
	kind    kind
	log     *slog.Logger
	delay   time.Duration
	maxBody int64
	limits  tensor.Limits
	models  map[string]*model
	perturb map[string]float64
}

// New returns a Server for opt.
func New(opt Options) (*Server, error) {
	s := &Server{
		log:     opt.Logger,
		delay:   opt.Delay,
		maxBody: opt.MaxBodyBytes,
		limits:  tensor.DefaultLimits,
		models:  sampleModels(),
		perturb: opt.Perturb,
	}
	if err := checkPerturb(s.models, s.perturb); err != nil {
		return nil, err
	}
	switch strings.ToLower(opt.Kind) {
	case "", "triton":
		s.kind = kindTriton
	case "kserve":
		s.kind = kindKServe
	case "mlserver":
		s.kind = kindMLServer
	default:
		return nil, fmt.Errorf("mockv2: unknown server kind %q (want triton, kserve or mlserver)", opt.Kind)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.delay <= 0 {
		s.delay = DefaultDelay
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	return s, nil
}

// httpError is a complete error answer: status, body and content type.
type httpError struct {
	status int
	body   []byte
	ctype  string
	header http.Header
}

func (e *httpError) Error() string { return fmt.Sprintf("%d %s", e.status, e.body) }

// errorJSON is the {"error": msg} answer all three servers use.
func errorJSON(status int, msg string) *httpError {
	return &httpError{status: status, body: marshal(struct {
		Error string `json:"error"`
	}{msg}), ctype: "application/json"}
}

// detailJSON is FastAPI's {"detail": ...} answer (KServe, MLServer).
func detailJSON(status int, detail any) *httpError {
	return &httpError{status: status, body: marshal(struct {
		Detail any `json:"detail"`
	}{detail}), ctype: "application/json"}
}

// internalText is Starlette's answer to an unhandled exception (MLServer).
func internalText() *httpError {
	return &httpError{status: http.StatusInternalServerError, body: []byte("Internal Server Error"), ctype: "text/plain; charset=utf-8"}
}

func (s *Server) notFound() *httpError {
	if s.kind == kindTriton {
		return errorJSON(http.StatusNotFound, "Not Found")
	}
	return detailJSON(http.StatusNotFound, "Not Found")
}

func (s *Server) methodNotAllowed() *httpError {
	if s.kind == kindTriton {
		return errorJSON(http.StatusMethodNotAllowed, "Method Not Allowed")
	}
	return detailJSON(http.StatusMethodNotAllowed, "Method Not Allowed")
}

// reply is a complete success answer.
type reply struct {
	status int
	header http.Header
	body   []byte
	// flush forces chunked transfer (KServe's binary responses carry no
	// Content-Length).
	flush bool
}

func jsonReply(body []byte) *reply {
	return &reply{status: http.StatusOK, header: http.Header{"Content-Type": {"application/json"}}, body: body}
}

// statusWriter records the status for the access log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets handlers force chunked encoding through the wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	rep, herr := s.handle(r)
	switch {
	case herr != nil:
		writeError(sw, herr)
	case rep != nil:
		writeReply(sw, rep)
	}
	s.log.Debug("mockv2 request", "method", r.Method, "path", r.URL.Path,
		"status", sw.status, "duration", time.Since(start))
}

func writeError(w http.ResponseWriter, e *httpError) {
	for k, v := range e.header {
		w.Header()[k] = v
	}
	if e.ctype != "" {
		w.Header().Set("Content-Type", e.ctype)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(e.body)))
	w.WriteHeader(e.status)
	_, _ = w.Write(e.body)
}

func writeReply(w http.ResponseWriter, rep *reply) {
	for k, v := range rep.header {
		w.Header()[k] = v
	}
	if _, ok := rep.header["Content-Type"]; !ok {
		// Leave Content-Type absent instead of letting net/http sniff one.
		w.Header()["Content-Type"] = nil
	}
	if !rep.flush {
		// net/http only adds Content-Length by itself to small bodies; the
		// servers imitated send it always, except KServe's chunked answers.
		w.Header().Set("Content-Length", strconv.Itoa(len(rep.body)))
	}
	w.WriteHeader(rep.status)
	if rep.flush {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	_, _ = w.Write(rep.body)
}

// handle applies the test hooks and routes the request.
func (s *Server) handle(r *http.Request) (*reply, *httpError) {
	if v := r.Header.Get(HeaderDelay); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxHeaderDelay {
			return nil, errorJSON(http.StatusBadRequest, fmt.Sprintf("mock: %s must be a duration between 0 and %v, got %q", HeaderDelay, MaxHeaderDelay, v))
		}
		// Read the body first: net/http notices a client that went away
		// only once the body is consumed, and a delayed call whose caller
		// left must end early, as a real server's would.
		if r.Body != nil {
			body, err := io.ReadAll(io.LimitReader(r.Body, s.maxBody+1))
			if err != nil {
				return nil, nil // the client went away mid-body
			}
			r.Body = io.NopCloser(bytes.NewReader(body)) // readBody applies the cap
		}
		if !sleep(r.Context(), d) {
			return nil, nil // the client went away; nothing to answer
		}
	}
	segs, ok := pathSegments(r.URL)
	if !ok || len(segs) == 0 || segs[0] != "v2" {
		return nil, s.notFound()
	}
	segs = segs[1:]
	switch {
	case len(segs) == 0:
		return s.route(r, http.MethodGet, s.serverMetadata)
	case len(segs) == 2 && segs[0] == "health" && (segs[1] == "live" || segs[1] == "ready"):
		return s.route(r, http.MethodGet, s.health(segs[1]))
	case len(segs) == 1 && segs[0] == "models" && s.kind == kindKServe:
		return s.route(r, http.MethodGet, s.modelList)
	case len(segs) == 2 && segs[0] == "repository" && segs[1] == "index" && s.kind != kindKServe:
		return s.route(r, http.MethodPost, s.repositoryIndex)
	case len(segs) >= 2 && segs[0] == "models":
		return s.routeModel(r, segs[1:])
	}
	return nil, s.notFound()
}

// pathSegments splits the escaped path and unescapes each segment, so that
// a model name may contain an escaped "/".
func pathSegments(u *url.URL) ([]string, bool) {
	parts := strings.Split(strings.Trim(u.EscapedPath(), "/"), "/")
	for i, p := range parts {
		dec, err := url.PathUnescape(p)
		if err != nil || dec == "" {
			return nil, false
		}
		parts[i] = dec
	}
	return parts, true
}

func (s *Server) route(r *http.Request, method string, h func(*http.Request) (*reply, *httpError)) (*reply, *httpError) {
	if r.Method != method {
		return nil, s.methodNotAllowed()
	}
	return h(r)
}

// modelRef is a parsed /v2/models/{m}[/versions/{v}] prefix.
type modelRef struct {
	name       string
	version    string
	hasVersion bool
}

func (s *Server) routeModel(r *http.Request, segs []string) (*reply, *httpError) {
	ref := modelRef{name: segs[0]}
	rest := segs[1:]
	if len(rest) >= 2 && rest[0] == "versions" {
		ref.version, ref.hasVersion = rest[1], true
		rest = rest[2:]
		if s.kind == kindTriton && !isDigits(ref.version) {
			return nil, s.notFound() // Triton's route regex only takes [0-9]+
		}
	}
	action := ""
	switch len(rest) {
	case 0:
	case 1:
		action = rest[0]
	default:
		return nil, s.notFound()
	}
	switch action {
	case "":
		return s.route(r, http.MethodGet, func(r *http.Request) (*reply, *httpError) { return s.modelMetadata(ref) })
	case "ready":
		return s.route(r, http.MethodGet, func(r *http.Request) (*reply, *httpError) { return s.modelReady(ref) })
	case "config":
		if s.kind == kindTriton {
			return s.route(r, http.MethodGet, func(r *http.Request) (*reply, *httpError) { return s.modelConfig(ref) })
		}
	case "infer":
		return s.route(r, http.MethodPost, func(r *http.Request) (*reply, *httpError) { return s.infer(r, ref) })
	}
	return nil, s.notFound()
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// lookup finds the model a request names, answering each server's
// not-found (or versioning) error.
func (s *Server) lookup(ref modelRef) (*model, *httpError) {
	m := s.models[ref.name]
	switch s.kind {
	case kindTriton:
		if ref.hasVersion {
			v, err := parseStol(ref.version)
			if err != nil {
				return nil, errorJSON(http.StatusBadRequest, "failed to get model version from specified version string '"+
					ref.version+"' (details: stol), version should be an integral value > 0")
			}
			if m != nil && v != 1 {
				return nil, errorJSON(http.StatusNotFound, fmt.Sprintf("Request for unknown model: '%s' version %d is not found", ref.name, v))
			}
		}
		if m == nil {
			return nil, errorJSON(http.StatusNotFound, "Request for unknown model: '"+ref.name+"' is not found")
		}
	case kindKServe:
		if ref.hasVersion {
			return nil, errorJSON(http.StatusNotImplemented, "Model versioning not supported yet.")
		}
		if m == nil {
			return nil, errorJSON(http.StatusNotFound, "Model with name "+ref.name+" does not exist.")
		}
	case kindMLServer:
		if ref.hasVersion && (m == nil || ref.version != mlserverModelVersion) {
			return nil, errorJSON(http.StatusNotFound, "Model "+ref.name+" with version "+ref.version+" not found")
		}
		if m == nil {
			return nil, errorJSON(http.StatusNotFound, "Model "+ref.name+" not found")
		}
	}
	return m, nil
}

// parseStol is std::stol on a string of digits: only overflow fails.
func parseStol(s string) (int64, error) {
	var v int64
	for _, c := range s {
		d := int64(c - '0')
		if v > (1<<63-1-d)/10 {
			return 0, errors.New("out of range")
		}
		v = v*10 + d
	}
	return v, nil
}

// sleep waits d or until ctx ends, reporting whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// readBody reads the request body within the size cap and undoes the
// Content-Encodings the imitated server understands.
func (s *Server) readBody(r *http.Request) ([]byte, *httpError) {
	tooBig := func() *httpError {
		msg := fmt.Sprintf("mock: request body exceeds the limit of %d bytes", s.maxBody)
		if s.kind == kindTriton {
			return errorJSON(http.StatusRequestEntityTooLarge, msg)
		}
		return detailJSON(http.StatusRequestEntityTooLarge, msg)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.maxBody+1))
	if err != nil {
		return nil, errorJSON(http.StatusBadRequest, "mock: reading the request body: "+err.Error())
	}
	if int64(len(body)) > s.maxBody {
		return nil, tooBig()
	}
	enc := strings.TrimSpace(r.Header.Get("Content-Encoding"))
	var zr io.Reader
	switch {
	case enc == "" || enc == "identity":
		return body, nil
	case enc == "gzip" && s.kind != kindKServe:
		g, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, s.decompressError(err)
		}
		zr = g
	case enc == "deflate" && s.kind == kindTriton:
		// Triton's inflater accepts zlib streams and raw deflate alike.
		if z, err := zlib.NewReader(bytes.NewReader(body)); err == nil {
			zr = z
		} else {
			zr = flate.NewReader(bytes.NewReader(body))
		}
	case s.kind == kindTriton:
		e := errorJSON(http.StatusNotImplemented, "Unsupported compression type")
		e.header = http.Header{"Accept-Encoding": {"gzip, deflate"}}
		return nil, e
	default:
		// KServe does not decompress; MLServer only knows gzip. Either way
		// the body reaches the JSON parser as it is.
		return body, nil
	}
	out, err := io.ReadAll(io.LimitReader(zr, s.maxBody+1))
	if err != nil {
		return nil, s.decompressError(err)
	}
	if int64(len(out)) > s.maxBody {
		return nil, tooBig()
	}
	return out, nil
}

func (s *Server) decompressError(err error) *httpError {
	if s.kind == kindTriton {
		return errorJSON(http.StatusInternalServerError, "failed to decompress the request body: "+err.Error())
	}
	return internalText()
}
