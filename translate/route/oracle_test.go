package route

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// The oracle: TF Serving's regexes, verbatim from http_server.cc (dispatch)
// and http_rest_api_util.cc (kPredictionApiGegex, kModelStatusApiRegex),
// used there with RE2::FullMatch. Go's regexp is RE2 with the same
// leftmost-first submatch semantics, so wrapped in \A…\z they give exactly
// FullMatch's captures. Parse used them until the hand-written matcher
// (match.go) replaced them on the hot path; the matcher must agree with
// them on every input.
var (
	dispatchRE = regexp.MustCompile(`\A(?i)/v1/.*\z`)
	predictRE  = regexp.MustCompile(`\A(?i)/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?:(classify|regress|predict)\z`)
	statusRE   = regexp.MustCompile(`\A(?i)/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:/(metadata))?\z`)
)

// parseOracle is Parse as it was with the regexes: the reference the
// differential tests and BenchmarkParse compare Parse with.
func parseOracle(method, path string) (Route, error) {
	if !dispatchRE.MatchString(path) {
		return Route{}, ErrNotTFServing
	}
	var re *regexp.Regexp
	switch method {
	case "POST":
		re = predictRE
	case "GET":
		re = statusRE
	default:
		return Route{}, malformed(method, path)
	}
	m := re.FindStringSubmatchIndex(path)
	if m == nil {
		return Route{}, malformed(method, path)
	}
	if bad := invalidTargetByte(path); bad >= 0 {
		return Route{}, targetError(method, path, m, bad)
	}
	var r Route
	if name := group(path, m, groupName); name != "" {
		r.Model = unescape(name)
	}
	if digits := group(path, m, groupVersion); digits != "" {
		v, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			return Route{}, apierr.Wrap(apierr.InvalidArgument, err,
				"Failed to convert version: "+digits+" to numeric.")
		}
		r.Version, r.HasVersion = v, true
	}
	if label := group(path, m, groupLabel); label != "" {
		r.Label = unescape(label)
	}
	last := group(path, m, groupLast)
	if method == "POST" {
		switch last {
		case "predict":
			r.Verb = Predict
		case "classify":
			r.Verb = Classify
		case "regress":
			r.Verb = Regress
		default:
			return Route{}, malformed(method, path)
		}
		return r, nil
	}
	r.Verb = Status
	if last == "metadata" {
		r.Verb = Metadata
	}
	if r.Model == "" {
		return Route{}, apierr.New(apierr.InvalidArgument, "Missing model name in request.")
	}
	return r, nil
}

// trickyPaths seed the oracle tests: case, Unicode folding, escapes, empty
// segments, long and overflowing versions, trailing slashes, verbs inside
// names, newlines, NUL and invalid UTF-8, each where a literal, a name, a
// version or a label is expected.
var trickyPaths = []string{
	"/v1/models/m:predict", "/V1/MODELS/M:PREDICT", "/v1/MoDeLs/m/VeRsIoNs/3/MeTaDaTa",
	"/v1/modelſ/m:predict", "/v1/modelſ/m", "/v1/models/m/verſions/3:claſſify", "/v1/models/m/labelſ/l/metadata",
	"/v1/models/a b/verſions/3:predict", "/v1/models/a b/labelſ/x", "/v1/models/a b:claſſify", "/v1/models/a b/metadata",
	"/v1/modelſ/a b", "/v1/models/ſ:regreſſ", "/v1/models/m:regreSS", "/v1/models/m/metadatſ",
	"/v1/models/\u212a:predict", "/v1/models/m/labels/\u212a", "/v1/models/m:predict\u212a", "/\u212a1/models/m",
	"/v1/models/\u017f", "/v1/models/\xc5:predict", "/v1/models/\xc5\xbf", "/v1/models/m/versions/\xd9\xa3",
	"/v1/models/a%2Fb:predict", "/v1/models/a%2fb/labels/c%2F:predict", "/v1/models/%2F", "/v1/models/m%3Apredict:predict",
	"/v1/models//m", "/v1/models//versions/3", "/v1/models/m//metadata", "/v1/models/m/versions//metadata",
	"/v1/models/m/versions/", "/v1/models/m/labels/", "/v1/models/m/labels//metadata", "/v1//models/m", "/v1/models/:predict",
	"/v1/models/m/versions/" + strings.Repeat("9", 1000) + ":predict", "/v1/models/m/versions/" + strings.Repeat("0", 500) + "7",
	"/v1/models/versions/99999999999999999999", "/v1/models/m/versions/9223372036854775807/metadata",
	"/v1/models/m/versions/9223372036854775808", "/v1/models/m/versions/18446744073709551616:PREDICT",
	"/v1/models/m/", "/v1/models/m:predict/", "/v1/models/m/metadata/", "/v1/models/", "/v1/models", "/v1/", "/v1",
	"/v1/models/m:predict:predict", "/v1/models/predict:predict", "/v1/models/m/labels/x:predict/metadata",
	"/v1/models/versions/metadata", "/v1/models/labels/metadata", "/v1/models/labels/labels/x", "/v1/models/versions/versions/1",
	"/v1/models/metadata/metadata", "/v1/models/versions/3/metadata", "/v1/models/labels/l/metadata", "/v1/models/versions/labels",
	"/v1/models/m\n", "/v1/models/m\n:predict", "\n/v1/models/m", "/v1/\n", "/v1/models/m\r", "/v1/models/m/metadata\n",
	"/v1/models/m\x00:predict", "/v1/models/m/labels/\x00", "/v1/models\x00", "/v1/models/m\xff", "/v1/models/m/versions/3\xff",
	"/v1/models/m?x=1", "/v1/models/m:predict?x", "/v1/models/m#f", "/v1/models/m/metadata?x",
}

// matchOracle checks the matcher against the regexes for one path:
// the same decisions and the same capture positions.
func matchOracle(t *testing.T, path string) {
	t.Helper()
	if got, want := isTFServingPath(path), dispatchRE.MatchString(path); got != want {
		t.Fatalf("isTFServingPath(%q) = %v; the regex says %v", path, got, want)
	}
	for _, c := range []struct {
		name  string
		match func(string) (groups, bool)
		re    *regexp.Regexp
	}{{"matchPredict", matchPredict, predictRE}, {"matchStatus", matchStatus, statusRE}} {
		g, ok := c.match(path)
		want := c.re.FindStringSubmatchIndex(path)
		if ok != (want != nil) || ok && fmt.Sprint(g[:]) != fmt.Sprint(want) {
			t.Fatalf("%s(%q) = %v, %v; the regex gives %v", c.name, path, g, ok, want)
		}
	}
}

// parseAgrees checks Parse against parseOracle for one request line: the
// same route, or the same error (sentinel, or code and text).
func parseAgrees(t *testing.T, method, path string) {
	t.Helper()
	r, err := Parse(method, path)
	wr, werr := parseOracle(method, path)
	if r != wr || (err == nil) != (werr == nil) || errors.Is(err, ErrNotTFServing) != errors.Is(werr, ErrNotTFServing) {
		t.Fatalf("Parse(%q, %q) = %+v, %v; the oracle gives %+v, %v", method, path, r, err, wr, werr)
	}
	if err != nil && !errors.Is(err, ErrNotTFServing) {
		ae, we := apierr.As(err), apierr.As(werr)
		if ae.Code != we.Code || ae.Msg != we.Msg {
			t.Fatalf("Parse(%q, %q): error %v; the oracle gives %v", method, path, err, werr)
		}
	}
}

func TestMatchOracle(t *testing.T) {
	paths := append([]string(nil), trickyPaths...)
	for _, tc := range parseCases {
		paths = append(paths, tc.path)
	}
	for _, p := range paths {
		matchOracle(t, p)
		for _, method := range []string{"GET", "POST", "PUT"} {
			parseAgrees(t, method, p)
		}
	}
}

// TestMatchOracleGrammar compares the matcher with the regexes on every
// path made of up to four pieces after "/v1/models" (three with -short):
// every order of literals, runs, separators and the bytes that end or
// break them.
func TestMatchOracleGrammar(t *testing.T) {
	pieces := []string{"/", ":", "versions", "VerſionS", "labels", "metadata", "METADATA", "predict", "Claſſify",
		"7", "x", "\u212a", "%2F", "\n", "\x00", "\xc5"}
	depth := 4
	if testing.Short() {
		depth = 3
	}
	var walk func(p string, d int)
	walk = func(p string, d int) {
		matchOracle(t, p)
		if d == 0 {
			return
		}
		for _, s := range pieces {
			walk(p+s, d-1)
		}
	}
	walk("/v1/models", depth)
}

// TestFoldOracle checks foldLiteral's case folding against (?i) for every
// rune and every letter the patterns spell, and for 'k' (whose 'K' the
// patterns happen not to need). One class of all letters finds the runes
// (?i) relates to any of them; only those are matched letter by letter.
func TestFoldOracle(t *testing.T) {
	const letters = "v1modelsrinabtcfygp:/k"
	anyLetter := regexp.MustCompile(`\A(?i)[` + letters + `]\z`)
	folds := 0
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		s := string(r)
		related := anyLetter.MatchString(s)
		for _, c := range letters {
			want := related && regexp.MustCompile(`\A(?i)`+string(c)+`\z`).MatchString(s)
			if got := foldLiteral(s, 0, string(c)) == len(s); got != want {
				t.Fatalf("foldLiteral(%q, %q) = %v; (?i) says %v", s, c, got, want)
			}
			if want && r >= utf8.RuneSelf {
				folds++
			}
		}
	}
	if folds != 2 { // 'ſ' for 's', 'K' for 'k'
		t.Fatalf("%d non-ASCII folds; want 2", folds)
	}
}

// FuzzParseOracle is the differential fuzz target: the matcher and Parse
// against the regexes and parseOracle on arbitrary request lines.
func FuzzParseOracle(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.method, tc.path)
	}
	for _, p := range trickyPaths {
		f.Add("GET", p)
		f.Add("POST", p)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		matchOracle(t, path)
		parseAgrees(t, method, path)
	})
}
