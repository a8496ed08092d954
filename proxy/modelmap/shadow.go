package modelmap

import "math"

// Shadow is a model's shadow comparison (the `shadow:` block): a sampled
// copy of each request goes to another server in the background, and its
// answer is compared with the primary's in TF terms (package
// proxy/shadow). The client always gets the primary's answer.
//
//	shadow:
//	  server: onnx          # required: a server of the map, or "default"
//	  sample: 0.05          # share of requests copied, 0…1 (default 0.05)
//	  max_inflight: 8       # copies running at once; more are dropped (default 8)
//	  tolerance: {abs: 1e-5, rel: 1e-4}   # |a−b| ≤ abs + rel·|a| (these defaults)
//	  mismatch_log: /var/log/tfsbridge/mnist-mismatches.jsonl   # optional
type Shadow struct {
	// Server is the name of the server the copies go to.
	Server string
	// Sample is the share of the model's requests that are copied.
	Sample float64
	// MaxInflight bounds the copies of this model running at once.
	MaxInflight int
	// Abs and Rel are the tolerance: an element of the shadow's answer
	// matches when |a−b| ≤ Abs + Rel·|a| (a the primary's value).
	Abs, Rel float64
	// MismatchLog, when set, is the JSONL file mismatches are appended to.
	MismatchLog string
}

// The defaults of the shadow block's optional fields.
const (
	DefaultShadowSample      = 0.05
	DefaultShadowMaxInflight = 8
	DefaultShadowAbs         = 1e-5
	DefaultShadowRel         = 1e-4
	// MaxShadowInflight bounds max_inflight: each copy may hold a request
	// and two answers in memory.
	MaxShadowInflight = 10_000
)

// rawShadow is the `shadow:` block as the YAML decoder reads it.
type rawShadow struct {
	Server      *string       `yaml:"server"`
	Sample      *float64      `yaml:"sample"`
	MaxInflight *integer      `yaml:"max_inflight"`
	Tolerance   *rawTolerance `yaml:"tolerance"`
	MismatchLog *string       `yaml:"mismatch_log"`
}

type rawTolerance struct {
	Abs *float64 `yaml:"abs"`
	Rel *float64 `yaml:"rel"`
}

// shadow validates a model's shadow block (p is its path) against the
// servers the map defines; nil when the block is absent.
func (v *validator) shadow(p path, rs *rawShadow, servers map[string]*rawServer) *Shadow {
	if rs == nil {
		return nil
	}
	sh := &Shadow{Sample: DefaultShadowSample, MaxInflight: DefaultShadowMaxInflight, Abs: DefaultShadowAbs, Rel: DefaultShadowRel}
	switch {
	case rs.Server == nil || *rs.Server == "":
		v.add(p, "shadow has no server: name the server the copies go to")
	default:
		sh.Server = *rs.Server
		if _, ok := servers[sh.Server]; !ok && sh.Server != DefaultServer {
			v.add(p.key("server"), "uses server %q, which servers does not define", sh.Server)
		}
	}
	if rs.Sample != nil {
		sh.Sample = *rs.Sample
		if !(sh.Sample >= 0 && sh.Sample <= 1) { // NaN too
			v.add(p.key("sample"), "sample %v: want a share between 0 and 1", *rs.Sample)
		}
	}
	if rs.MaxInflight != nil {
		if n := int64(*rs.MaxInflight); n < 1 || n > MaxShadowInflight {
			v.add(p.key("max_inflight"), "max_inflight %d: want 1 to %d", n, MaxShadowInflight)
		} else {
			sh.MaxInflight = int(n)
		}
	}
	if t := rs.Tolerance; t != nil {
		tp := p.key("tolerance")
		for _, f := range []struct {
			name string
			raw  *float64
			dst  *float64
		}{{"abs", t.Abs, &sh.Abs}, {"rel", t.Rel, &sh.Rel}} {
			if f.raw == nil {
				continue
			}
			if x := *f.raw; x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
				v.add(tp.key(f.name), "%s %v: want a finite number ≥ 0", f.name, x)
			} else {
				*f.dst = x
			}
		}
	}
	if rs.MismatchLog != nil {
		if *rs.MismatchLog == "" {
			v.add(p.key("mismatch_log"), "mismatch_log is empty: give a file path, or leave the key out to only log mismatches")
		}
		sh.MismatchLog = *rs.MismatchLog
	}
	return sh
}
