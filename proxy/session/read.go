package session

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/tfsbridge/tfsbridge/proxy/inflight"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// Bounds on the readiness calls one status request may cause: a model
// with hundreds of versions must not turn one GET into hundreds of
// backend calls. Versions past maxReadyChecks take the model-level answer.
const (
	maxReadyChecks   = 16
	readyConcurrency = 4
)

// TF model version states used in status bodies.
const (
	stateAvailable = "AVAILABLE"
	// stateLoading is reported for a version the v2 server lists but does
	// not call ready: v2 has no finer state, and "loading" is the common
	// reason (TF's own states are UNKNOWN, START, LOADING, AVAILABLE,
	// UNLOADING, END).
	stateLoading = "LOADING"
	errorCodeOK  = "OK"
	// noVersion stands for a model whose metadata lists no versions
	// (KServe): TF always reports at least one version, and a version
	// field defaults to 0 in its protobuf.
	noVersion = "0"
)

// readFailed is the error a status or metadata GET answers: when a
// shutdown ran out of time (package inflight cut the exchange's context),
// TF's 503 that a cut predict gets too, not the 499 of a client gone.
func readFailed(ctx context.Context, err error) error {
	if inflight.IsCut(ctx) {
		return apierr.Wrap(apierr.Unavailable, err, inflight.MsgShutdown)
	}
	return err
}

// status answers GET /v1/models/m[/versions/N|/labels/L] from the v2
// metadata (its version list) and readiness. Labels are ignored, as TF's
// status implementation ignores them.
func (s *Session) status(ctx context.Context) Action {
	r := s.rt.tf
	r.Label = ""
	sig, err := s.rt.signature(ctx, r)
	if err != nil {
		return s.fail(readFailed(ctx, s.statusNotFound(err)))
	}
	s.confirmed = true

	var versions []string
	switch {
	case r.HasVersion:
		versions = []string{strconv.FormatInt(r.Version, 10)}
	case len(sig.Versions) > 0:
		versions = sortVersionsDesc(sig.Versions)
	default:
		versions = []string{noVersion}
	}

	ready, err := s.readiness(ctx, r, versions)
	if err != nil {
		return s.fail(readFailed(ctx, s.statusNotFound(err)))
	}
	out := make([]tfresponse.VersionStatus, len(versions))
	for i, v := range versions {
		out[i] = tfresponse.VersionStatus{Version: v, State: stateLoading, ErrorCode: errorCodeOK}
		if ready[i] {
			out[i].State = stateAvailable
		}
	}
	s.complete(http.StatusOK, nil)
	return jsonResponse(http.StatusOK, tfresponse.Status(nil, out), "tfsbridge_status")
}

// readiness returns, per version, whether the v2 server calls it ready.
// One model-level call answers for all versions when that is all the
// server can say (KServe rejects version paths; a single version; a
// versioned request); otherwise each version is asked, a few at a time.
func (s *Session) readiness(ctx context.Context, r route.Route, versions []string) ([]bool, error) {
	ready := make([]bool, len(versions))
	kind, kindErr := s.rt.kind(ctx)
	if r.HasVersion || len(versions) == 1 || (kindErr == nil && kind == oip.KServe) {
		ok, err := s.rt.modelReady(ctx, r)
		if err != nil {
			return nil, err
		}
		for i := range ready {
			ready[i] = ok
		}
		return ready, nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readyConcurrency)
	checked := min(len(versions), maxReadyChecks)
	for i := range checked {
		vr := r
		if n, err := strconv.ParseInt(versions[i], 10, 64); err == nil {
			vr.Version, vr.HasVersion = n, true
		}
		goSafely(g, func() error {
			ok, err := s.rt.modelReady(gctx, vr)
			ready[i] = ok
			return err
		})
	}
	if checked < len(versions) {
		goSafely(g, func() error {
			ok, err := s.rt.modelReady(gctx, r)
			for i := checked; i < len(versions); i++ {
				ready[i] = ok
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		repanic(err)
		return nil, err
	}
	return ready, nil
}

// statusNotFound rewrites a not-found error into TF's status texts,
// which differ from the predict/metadata "Servable not found" ones.
func (s *Session) statusNotFound(err error) error {
	e := apierr.As(err)
	if e.Code != apierr.NotFound {
		return e
	}
	if s.rt.tf.HasVersion {
		return apierr.Wrap(apierr.NotFound, e, "Could not find version "+strconv.FormatInt(s.rt.tf.Version, 10)+" of model "+s.rt.tf.Model)
	}
	return apierr.Wrap(apierr.NotFound, e, "Could not find any versions of model "+s.rt.tf.Model)
}

// metadata answers GET …/metadata with TF's signature_def layout built
// from the v2 signature. A label is unknown to v2, as in predict.
func (s *Session) metadata(ctx context.Context) Action {
	r := s.rt.tf
	if s.rt.model != nil && r.Label == "" {
		return s.mappedMetadata(ctx)
	}
	if r.Label != "" {
		return s.fail(apierr.InvalidArgumentf("Unrecognized servable version label: %s", r.Label))
	}
	sig, err := s.rt.signature(ctx, r)
	if err != nil {
		return s.fail(readFailed(ctx, err))
	}
	s.confirmed = true
	version := ""
	if r.HasVersion {
		version = strconv.FormatInt(r.Version, 10)
	} else if vs := sortVersionsDesc(sig.Versions); len(vs) > 0 {
		// TF resolves "latest" to the highest version and prints it.
		version = vs[0]
	}
	s.complete(http.StatusOK, nil)
	return jsonResponse(http.StatusOK, tfresponse.Metadata(nil, sig, version), "tfsbridge_metadata")
}

// mappedMetadata answers GET …/metadata for a mapped model: one
// signature_def per mapped signature, in TF names.
func (s *Session) mappedMetadata(ctx context.Context) Action {
	names := s.rt.model.SignatureNames()
	defs := make([]tfresponse.SignatureDef, 0, len(names))
	var versions []string
	for i, name := range names {
		sig, _, err := s.rt.mappedSignature(ctx, name)
		if err != nil {
			return s.fail(readFailed(ctx, err))
		}
		if i == 0 {
			s.confirmed = true
			versions = sig.Versions
		}
		defs = append(defs, tfresponse.SignatureDef{Name: name, Signature: sig})
	}
	version := ""
	if s.rt.tf.HasVersion {
		version = strconv.FormatInt(s.rt.tf.Version, 10)
	} else if vs := sortVersionsDesc(versions); len(vs) > 0 {
		version = vs[0]
	}
	s.complete(http.StatusOK, nil)
	return jsonResponse(http.StatusOK, tfresponse.MetadataDefs(nil, s.rt.tf.Model, version, defs), "tfsbridge_metadata")
}

// sortVersionsDesc returns a sorted copy: numeric versions (Triton's) in
// descending numeric order as TF lists them, then any non-numeric ones
// (MLServer allows free strings) in descending string order.
func sortVersionsDesc(vs []string) []string {
	out := slices.Clone(vs)
	slices.SortStableFunc(out, func(a, b string) int {
		na, ea := strconv.ParseInt(a, 10, 64)
		nb, eb := strconv.ParseInt(b, 10, 64)
		switch {
		case ea == nil && eb == nil:
			switch {
			case na > nb:
				return -1
			case na < nb:
				return 1
			}
			return 0
		case ea == nil:
			return -1
		case eb == nil:
			return 1
		}
		return -strings.Compare(a, b)
	})
	return out
}
