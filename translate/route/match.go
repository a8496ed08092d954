package route

import "strings"

// A hand-written matcher for TF Serving's three routing regexes (RE2,
// http_server.cc and http_rest_api_util.cc; their text is in
// oracle_test.go):
//
//	dispatch  \A(?i)/v1/.*\z
//	predict   \A(?i)/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?:(classify|regress|predict)\z
//	status    \A(?i)/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:/(metadata))?\z
//
// It is written by hand because it runs on every exchange: the Go regexps
// it replaces took about 10% of tfsbridge's own handling time of a small
// exchange (issue #23; BenchmarkParse compares both). The regexps stay as
// the test oracle: TestMatchOracle* and FuzzParseOracle require the same
// decision and the same capture positions for every input.
//
// What the patterns decide, rule by rule (FullMatch, leftmost-first):
//
//   - (?i) folds each literal letter to both ASCII cases and, as RE2 and Go
//     fold by Unicode simple case folding, to 'ſ' (U+017F) for 's' and 'K'
//     (U+212A) for 'k' (no other rune folds to a letter of these literals;
//     TestFoldOracle checks every rune). So "/v1/modelſ/m" is a status path.
//   - '.' is any rune but '\n', and Go reads an invalid UTF-8 byte as
//     U+FFFD, which '.' and [^/:] match: ".*" is "no '\n' byte" and
//     "[^/:]+" is "one or more bytes other than '/' and ':'" (a multi-byte
//     UTF-8 sequence holds no ASCII byte, so a run always ends on a rune
//     boundary). RE2 in C++ refuses some invalid UTF-8 there, but such a
//     target never reaches TF Serving's routing (libevent refuses every byte
//     above 0x7F first, see invalidTargetByte); the Go decision is kept.
//     [^/:] also matches '\n', but dispatch has refused every '\n' already.
//   - \d is ASCII digits only, unfolded.
//   - Every run ([^/:]+, \d+) is followed by '/', ':' or \z in these
//     patterns, so it can only match at its longest: a shorter run leaves a
//     run byte where '/', ':' or the end must be. The version and label
//     alternatives begin with different literals, and so do the verbs, so
//     at most one of each can match. The one real choice is the status
//     pattern's optional name: taken first (a greedy "?"), dropped only if
//     the rest then fails ("GET /v1/models/versions/3" has no name, while
//     "GET /v1/models/metadata" is the status of a model named "metadata").

// groups holds a match's capture positions in FindStringSubmatchIndex's
// layout: group i spans [2i, 2i+1], both -1 when it did not take part.
type groups [10]int

var noGroups = groups{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1}

// isTFServingPath reports whether path matches \A(?i)/v1/.*\z.
func isTFServingPath(path string) bool {
	return len(path) >= 4 && path[0] == '/' && path[1]|0x20 == 'v' && path[2] == '1' && path[3] == '/' &&
		strings.IndexByte(path[4:], '\n') < 0
}

// matchPredict matches path against the predict pattern.
func matchPredict(p string) (groups, bool) {
	g := noGroups
	i := foldLiteral(p, 0, "/v1/models/")
	if i < 0 {
		return g, false
	}
	n := runEnd(p, i)
	if n == i {
		return g, false
	}
	g[2*groupName], g[2*groupName+1] = i, n
	j := n
	if j < len(p) && p[j] == '/' {
		// After the name, '/' can only open the version or label.
		end, grp, s, e := versionOrLabel(p, j)
		if end < 0 {
			return g, false
		}
		g[2*grp], g[2*grp+1] = s, e
		j = end
	}
	if j == len(p) || p[j] != ':' {
		return g, false
	}
	j++
	for _, verb := range [...]string{"classify", "regress", "predict"} {
		if foldLiteral(p, j, verb) == len(p) {
			g[2*groupLast], g[2*groupLast+1] = j, len(p)
			g[0], g[1] = 0, len(p)
			return g, true
		}
	}
	return g, false
}

// matchStatus matches path against the status pattern.
func matchStatus(p string) (groups, bool) {
	i := foldLiteral(p, 0, "/v1/models")
	if i < 0 {
		return noGroups, false
	}
	// The optional name first, as leftmost-first tries it.
	if i < len(p) && p[i] == '/' {
		if n := runEnd(p, i+1); n > i+1 {
			if g, ok := statusTail(p, n); ok {
				g[2*groupName], g[2*groupName+1] = i+1, n
				return g, true
			}
		}
	}
	return statusTail(p, i)
}

// statusTail matches the status pattern's rest from i:
// (?:/versions/(\d+)|/labels/([^/:]+))?(?:/(metadata))?\z.
func statusTail(p string, i int) (groups, bool) {
	g := noGroups
	g[0], g[1] = 0, len(p)
	if end, grp, s, e := versionOrLabel(p, i); end >= 0 {
		if m, ok := metadataTail(p, end); ok {
			g[2*grp], g[2*grp+1] = s, e
			if m >= 0 {
				g[2*groupLast], g[2*groupLast+1] = m, len(p)
			}
			return g, true
		}
	}
	if m, ok := metadataTail(p, i); ok {
		if m >= 0 {
			g[2*groupLast], g[2*groupLast+1] = m, len(p)
		}
		return g, true
	}
	return noGroups, false
}

// metadataTail matches (?:/(metadata))?\z at i: ok, and where the group
// starts, -1 when the path ends at i.
func metadataTail(p string, i int) (int, bool) {
	switch {
	case i == len(p):
		return -1, true
	case p[i] == '/' && foldLiteral(p, i+1, "metadata") == len(p):
		return i + 1, true
	}
	return -1, false
}

// versionOrLabel matches /versions/(\d+) or /labels/([^/:]+) at i. It
// returns the end of the match (-1 for none), the group that matched and
// that group's span.
func versionOrLabel(p string, i int) (end, grp, s, e int) {
	if s = foldLiteral(p, i, "/versions/"); s >= 0 {
		e = s
		for e < len(p) && '0' <= p[e] && p[e] <= '9' {
			e++
		}
		if e > s {
			return e, groupVersion, s, e
		}
		return -1, 0, 0, 0
	}
	if s = foldLiteral(p, i, "/labels/"); s >= 0 {
		if e = runEnd(p, s); e > s {
			return e, groupLabel, s, e
		}
	}
	return -1, 0, 0, 0
}

// runEnd returns the end of the [^/:]* run starting at i.
func runEnd(p string, i int) int {
	for i < len(p) && p[i] != '/' && p[i] != ':' {
		i++
	}
	return i
}

// foldLiteral matches lit (lower-case ASCII) at p[i:] as (?i) does: a
// letter also matches its upper case, 's' also 'ſ' and 'k' also 'K'. It
// returns the end of the match in p, or -1.
func foldLiteral(p string, i int, lit string) int {
	for j := 0; j < len(lit); j++ {
		c := lit[j]
		switch {
		case i == len(p):
			return -1
		case p[i] == c || 'a' <= c && c <= 'z' && p[i] == c-'a'+'A':
			i++
		case c == 's' && strings.HasPrefix(p[i:], "\u017f"):
			i += len("\u017f")
		case c == 'k' && strings.HasPrefix(p[i:], "\u212a"):
			i += len("\u212a")
		default:
			return -1
		}
	}
	return i
}
