package modelmap

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Server kinds the map adds to the v2 ones.
const (
	// KindV2 is the file's way to say "a v2 server, detected with GET
	// /v2"; Parse stores it as "auto".
	KindV2 = "v2"
	// KindTFServing is a TF Serving REST server: requests for a model
	// that reaches it pass through unchanged — path, body and answer —
	// only the upstream changes. Renames, labels and signatures describe
	// the v2 side of a model and never apply to it.
	KindTFServing = "tfserving"
)

// MaxWeight bounds one split weight: weights are shares, not counts, and
// a bound keeps their sum far from overflowing.
const MaxWeight = 1_000_000

// TFServing reports whether s is a TF Serving server (nil: the default
// server, which is always a v2 one).
func (s *Server) TFServing() bool { return s != nil && s.Kind == KindTFServing }

// Split shares a model's exchanges among servers by weight. Each exchange
// is assigned once, at its request headers (Pick); a Split is immutable,
// so an exchange keeps the server it got while a reload installs new
// weights.
type Split struct {
	// Shares are the servers and their weights, by server name; a
	// weight may be 0 (a server kept in the file but sent nothing).
	Shares []Share
	// Key, when set, is the lower-case request header whose value makes
	// the choice sticky: the same value always reaches the same server
	// while the weights stay the same.
	Key   string
	total int64
}

// Share is one server of a split and its weight.
type Share struct {
	Server string
	Weight int64
}

// Pick returns the server an exchange goes to. key is the value of the
// split's key header ("" when the request has none): with a key the
// choice is weighted rendezvous hashing of (server, key), so the same key
// always reaches the same server, and when one server's weight grows the
// keys it already had stay with it (only keys from the others move to
// it) — a user moved to the new model during a migration is not moved
// back by the next step. Without a key the choice is random by weight.
func (s *Split) Pick(key string) string {
	if key == "" {
		n := rand.Int64N(s.total)
		for _, sh := range s.Shares {
			if n < sh.Weight {
				return sh.Server
			}
			n -= sh.Weight
		}
	}
	best, bestScore := "", math.Inf(-1)
	for _, sh := range s.Shares {
		if sh.Weight == 0 {
			continue
		}
		// u is uniform in (0, 1) for each (server, key); -w/ln(u) is the
		// score whose maximum falls on each server with probability
		// w/total.
		u := (float64(keyHash(sh.Server, key)>>11) + 0.5) / (1 << 53)
		if score := float64(sh.Weight) / -math.Log(u); score > bestScore {
			best, bestScore = sh.Server, score
		}
	}
	return best
}

// Servers returns the split's server names, sorted.
func (s *Split) Servers() []string {
	names := make([]string, len(s.Shares))
	for i, sh := range s.Shares {
		names[i] = sh.Server
	}
	return names
}

// keyHash is FNV-1a of server, a 0 byte and key, finished by
// SplitMix64's mixer: FNV alone leaves keys that differ in their last
// byte (user-1, user-2) close in the high bits the score uses.
func keyHash(server, key string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := range len(server) {
		h = (h ^ uint64(server[i])) * prime
	}
	h *= prime // the 0 byte between the two
	for i := range len(key) {
		h = (h ^ uint64(key[i])) * prime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// split validates a model's split and split_key and sets mm.Split, and
// mm.Server to the split's heaviest server.
func (v *validator) split(p path, mm *Model, rm *rawModel, servers map[string]*rawServer) {
	if rm.Split == nil {
		if rm.SplitKey != nil {
			v.add(p.key("split_key"), "split_key without split: name the servers and their weights in split")
		}
		return
	}
	sp := p.key("split")
	if rm.Server != nil {
		v.add(p.key("server"), "set server or split, not both: a split names every server it sends to")
	}
	s := &Split{}
	for _, name := range sortedKeys(rm.Split) {
		w := rm.Split[name]
		wp := sp.key(name)
		_, defined := servers[name]
		switch {
		case !defined && name != DefaultServer:
			v.add(wp, "uses server %q, which servers does not define", name)
		case w == nil:
			v.add(wp, "server %q has no weight: give it an integer (0 sends it nothing)", name)
		case *w < 0:
			v.add(wp, "weight %d is negative", *w)
		case *w > MaxWeight:
			v.add(wp, "weight %d is over %d: weights are shares, 90 and 10 say the same as 900 and 100", *w, MaxWeight)
		default:
			s.Shares = append(s.Shares, Share{Server: name, Weight: int64(*w)})
			s.total += int64(*w)
		}
	}
	if s.total == 0 && len(s.Shares) == len(rm.Split) {
		v.add(sp, "the weights add up to 0: at least one server must get a share")
	}
	if rm.SplitKey != nil {
		s.Key = *rm.SplitKey
		if !validHeaderName(s.Key) {
			v.add(p.key("split_key"), "%q: want a lower-case HTTP header name, such as x-user-id", s.Key)
		}
	}
	mm.Split = s
	if i := heaviest(s.Shares); i >= 0 {
		mm.Server = s.Shares[i].Server
	}
}

// heaviest is the index of the share with the largest weight, the first
// by name on a tie; -1 for none.
func heaviest(shares []Share) int {
	best := -1
	for i, sh := range shares {
		if best < 0 || sh.Weight > shares[best].Weight {
			best = i
		}
	}
	return best
}

// validHeaderName reports whether name is a lower-case HTTP field name
// (RFC 9110 token): Envoy and HTTP/2 carry header names in lower case, so
// an upper-case one would never match.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := range len(name) {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c < 0x80 && c > ' ' && slices.Contains([]byte("!#$%&'*+-.^_`|~"), c):
		default:
			return false
		}
	}
	return true
}

// tfservingOnly refuses, for a model that only a TF Serving server
// serves, the fields that describe the v2 side: such requests pass
// unchanged, so a rename or a label there would silently do nothing.
// (In a split, they apply to the v2 servers' share.)
func (v *validator) tfservingOnly(p path, mm *Model, rm *rawModel, servers map[string]*rawServer) {
	if mm.Split != nil || rm.Server == nil {
		return
	}
	if rs := servers[mm.Server]; rs == nil || rs.Kind != KindTFServing {
		return
	}
	for _, f := range []struct {
		key string
		set bool
	}{
		{"model", rm.Model != nil}, {"labels", rm.Labels != nil}, {"inputs", rm.Inputs != nil},
		{"outputs", rm.Outputs != nil}, {"metadata", rm.Metadata != nil}, {"signatures", rm.Signatures != nil},
	} {
		if f.set {
			v.add(p.key(f.key), "server %q is a TF Serving server: its requests pass unchanged, so %s (which describes a v2 model) would do nothing", mm.Server, f.key)
		}
	}
}
