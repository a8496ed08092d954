package tfrequest

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/internal/oracle"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// streamChunks are the chunk sizes every exact-mode check cuts a body
// into (0: the whole body in one Write).
var streamChunks = []int{1, 2, 3, 7, 64, 0}

// streamDecode runs the exact-mode decoder over body in chunks of size n
// (0: whole).
func streamDecode(body []byte, resolve Resolver, lim tensor.Limits, n int) (*Request, error) {
	if n <= 0 {
		n = max(len(body), 1)
	}
	var cuts []int
	for p := n; p < len(body); p += n {
		cuts = append(cuts, p)
	}
	return streamCuts(body, resolve, lim, cuts)
}

// streamCuts runs the exact-mode decoder over body cut at the sorted
// offsets cuts, each chunk a copy that is overwritten after Write.
func streamCuts(body []byte, resolve Resolver, lim tensor.Limits, cuts []int) (*Request, error) {
	d := NewDecoder(resolve, lim)
	prev := 0
	for _, c := range append(slices.Clone(cuts), len(body)) {
		chunk := slices.Clone(body[prev:c])
		prev = c
		err := d.Write(chunk)
		for i := range chunk {
			chunk[i] = 0xAA
		}
		if err != nil {
			// Write's error is final: Close must say the same.
			if _, cerr := d.Close(); cerr != err { //nolint:errorlint // the same error value, not a wrapped one
				return nil, errors.Join(err, cerr)
			}
			return nil, err
		}
	}
	return d.Close()
}

// checkStream asserts the exact-mode contract on one body for every chunk
// size: the decoder answers what Parse answers — the same Request, or an
// *apierr.Error with the same code and text — or, for the documented
// undecidable bodies only, a 400 wrapping ErrUndecided. It returns whether
// any chunking was undecided.
func checkStream(t *testing.T, body []byte, resolve Resolver, lim tensor.Limits) (undecidedSeen bool) {
	t.Helper()
	exact, exErr := tapeParse(body, resolve, lim)
	if exErr == nil {
		defer exact.Release()
	}
	for _, n := range streamChunks {
		got, err := streamDecode(body, resolve, lim, n)
		undecidedSeen = sameAnswer(t, body, exact, exErr, got, err, n) || undecidedSeen
	}
	return undecidedSeen
}

// sameAnswer asserts that the streamed answer (got, err) is Parse's
// (exact, exErr), or a 400 wrapping ErrUndecided, which it reports. how
// names the chunking in messages.
func sameAnswer(t *testing.T, body []byte, exact *Request, exErr error, got *Request, err error, how any) bool {
	t.Helper()
	if errors.Is(err, ErrUndecided) {
		if e := apierr.As(err); e.HTTPStatus() != 400 {
			t.Fatalf("%v: undecided answer has status %d", how, e.HTTPStatus())
		}
		return true
	}
	switch {
	case exErr != nil:
		if err == nil {
			got.Release()
			t.Fatalf("%v: decoder accepts %q, Parse says %v", how, body, exErr)
		}
		want, have := apierr.As(exErr), apierr.As(err)
		if want.Code != have.Code || want.Msg != have.Msg {
			t.Fatalf("%v of %q:\n got %v %q\nwant %v %q", how, body, have.Code, have.Msg, want.Code, want.Msg)
		}
	case err != nil:
		t.Fatalf("%v of %q: decoder error %v, Parse succeeds", how, body, err)
	default:
		d := sameRequest(exact, got)
		got.Release()
		if d != "" {
			t.Fatalf("%v of %q: %s", how, body, d)
		}
	}
	return false
}

// TestStreamSeeds checks the fuzz seeds against every fuzz signature in
// every chunking: none is undecided but for an input named "b64".
func TestStreamSeeds(t *testing.T) {
	lim := tensor.Limits{MaxDepth: 16, MaxElements: 1 << 8}
	for _, sig := range fuzzSigs {
		for _, body := range streamSeeds {
			if checkStream(t, []byte(body), fixed(sig), lim) && !oracle.Undecidable([]byte(body), sig, lim) {
				t.Errorf("%q: undecided", body)
			}
		}
	}
}

// FuzzStream cuts random bodies at random points: the streaming decoder
// answers exactly as Parse over the whole body — tensors, or error code
// and text — except for the documented undecidable bodies (Undecidable),
// which get a 400 wrapping ErrUndecided.
func FuzzStream(f *testing.F) {
	for _, tc := range onePassCases {
		if len(tc.body) < 4096 {
			f.Add([]byte(tc.body), uint8(0), uint64(1))
		}
	}
	for i, s := range streamSeeds {
		f.Add([]byte(s), uint8(i), uint64(i))
	}
	lim := tensor.Limits{MaxDepth: 16, MaxElements: 1 << 8}
	f.Fuzz(func(t *testing.T, body []byte, sel uint8, seed uint64) {
		sig := fuzzSigs[int(sel)%len(fuzzSigs)]
		r := rand.New(rand.NewPCG(seed, seed>>32))
		cuts := randomCuts(r, len(body))
		exact, exErr := tapeParse(body, fixed(sig), lim)
		if exErr == nil {
			defer exact.Release()
		}
		got, err := streamCuts(body, fixed(sig), lim, cuts)
		if sameAnswer(t, body, exact, exErr, got, err, cuts) && !oracle.Undecidable(body, sig, lim) {
			t.Fatalf("cut at %v: undecided %v for a body Undecidable does not list", cuts, err)
		}
	})
}

// fuzzSigs are the signatures the stream tests read bodies against.
var fuzzSigs = []*tensor.Signature{
	sigOf("x:FP32"),
	sigOf("a:INT32", "s:BYTES"),
	sigOf("a:INT8", "s:BYTES", "h:FP16", "b:BOOL", "u:UINT64", "d:FP64", "w:BF16", "v:UINT16"),
	sigOf("s:BYTES"),
	sigOf("x:FP64"),
	sigOf("b64:BYTES", "a:FP32"),
}

// streamSeeds are bodies for FuzzStream: errors of every class, where the
// stream must find TF's precedence.
var streamSeeds = []string{
	`{"instances": [[1, "x"], [2]]}`,
	`{"instances": [[1, 2], [3, "x", 4]]}`,
	`{"instances": [[[1], [2, "y"]]]}`,
	`{"inputs": {"s": ["x", 1], "a": [1, "z"]}}`,
	`{"inputs": {"a": [[1], [2, 3]], "s": "q"}}`,
	`{"inputs": {"s": 1, "a": [[1, "x"]]}}`,
	`{"inputs": {"s": [[1], 2], "a": [[1], [2, 3]]}}`,
	`{"inputs": {"s": {"b64": 1}, "a": 1.5}}`,
	`{"instances": [{"a": 1, "s": "x"}, {"a": "bad", "s": 2}]}`,
	`{"instances": [{"a": 1}, {"s": "x", "a": 2}], "signature_name": 3}`,
	`{"instances": [1, 2], "inputs": [3], "signature_name": "z"}`,
	`{"instances": [{"b64": "aGk="}, {"b64": "!!"}]}`,
	`{"instances": [{"b64": "aGk=", "x": 1}]}`,
	`{"instances": [{"s": {"b64": 1}, "a": 2}]}`,
	`{"inputs": {"b64": "aGk="}}`,
	`{"inputs": {"b64": 1, "s": ["x"], "a": [2]}}`,
	`{"inputs": [{"k": [1, 2, NaN, 3]}]}`,
	`{"instances": [1, 2, 3], "z": [1, 2,, 3]}`,
	`{"instances": ["a\u00e9\ud83d\ude00", "\u12", "\q"]}`,
	`{"instances": [1e400]}`,
	`{"instances": [tru, 1]}`,
	`{"instances": [{"s\u0000x": "a", "a": 1, "s": "b"}]}`,
	`{"instances": [{}]}`,
	`[1, {"a": [true, null]}, "x"]`,
	"\xEF\xBB\xBF{\"instances\": [1]}\x00",
}

// TestStreamSignatures: the resolver's answers reach the stream as they
// reach Parse — errors as is, a signature without inputs, and a
// "signature_name" read after the values (resolved late: decided when it
// names the same inputs, undecided otherwise).
func TestStreamSignatures(t *testing.T) {
	a, same, other := sigOf("x:FP32"), sigOf("x:FP32"), sigOf("y:FP32")
	resolve := func(name string) (*tensor.Signature, error) {
		switch name {
		case "", "a":
			return a, nil
		case "same":
			return same, nil
		case "other":
			return other, nil
		case "empty":
			return &tensor.Signature{}, nil
		}
		return nil, apierr.Errorf(apierr.NotFound, "Serving signature name: %q not found in signature def", name)
	}
	for _, tc := range []struct {
		body      string
		undecided bool
	}{
		{body: `{"signature_name": "a", "instances": [1, 2]}`},
		{body: `{"instances": [1, 2], "signature_name": "same"}`},
		{body: `{"instances": [1, "x"], "signature_name": "same"}`},
		{body: `{"instances": [1, 2], "signature_name": "other"}`, undecided: true},
		{body: `{"instances": [1, 2], "signature_name": "nope"}`},
		{body: `{"instances": [1, 2], "signature_name": "empty"}`},
		{body: `{"signature_name": "nope", "instances": [1, 2]}`},
		{body: `{"signature_name": "empty", "inputs": [1, 2]}`},
		{body: `{"signature_name": "nope"}`},
		{body: `{"signature_name": "empty", "z": 1}`},
		{body: `{"signature_name": 7, "instances": [1, 2]}`},
		{body: `{"instances": [1, 2], "signature_name": "other", "inputs": 3}`},
		{body: `{"instances": [], "signature_name": "other"}`},
	} {
		if got := checkStream(t, []byte(tc.body), resolve, tensor.Limits{}); got != tc.undecided {
			t.Errorf("%s: undecided = %v, want %v", tc.body, got, tc.undecided)
		}
	}
}

// TestStreamLongTokens: a number or literal longer than jsontext.MaxPending cut by
// chunks is decided where rapidjson stops inside the bytes held, and
// undecided (documented) only when it is one long number.
func TestStreamLongTokens(t *testing.T) {
	digits := strings.Repeat("1", 5000)
	sig := sigOf("x:FP64")
	for _, tc := range []struct {
		body      string
		undecided bool
	}{
		{body: `{"instances": [` + digits + `]}`}, // too big for a double: told early
		{body: `{"instances": [0.` + digits + `]}`, undecided: true},
		{body: `{"instances": [1e-` + digits + `]}`, undecided: true},
		{body: `{"instances": [1` + strings.Repeat("x", 5000) + `]}`},
		{body: `{"instances": [tru` + strings.Repeat("e", 5000) + `]}`},
		{body: `{"instances": [1e` + digits + `]}`},
		{body: `{"instances": [-` + strings.Repeat("-", 5000) + `]}`},
		{body: digits + `x`},
	} {
		if !oracle.Undecidable([]byte(tc.body), sig, tensor.Limits{}) && tc.undecided {
			t.Errorf("%.40s…: Undecidable does not list it", tc.body)
		}
		if got := checkStream(t, []byte(tc.body), fixed(sig), tensor.Limits{}); got != tc.undecided {
			t.Errorf("%.40s…: undecided = %v, want %v", tc.body, got, tc.undecided)
		}
	}
	// No default signature: a late name cannot be checked.
	resolve := func(name string) (*tensor.Signature, error) {
		if name == "" {
			return nil, apierr.Errorf(apierr.FailedPrecondition, "Default serving signature key not found.")
		}
		return sig, nil
	}
	for _, tc := range []struct {
		body      string
		undecided bool
	}{
		{body: `{"instances": [1], "signature_name": "a"}`, undecided: true},
		{body: `{"instances": [1]}`},
		{body: `{"signature_name": "a", "instances": [1]}`},
	} {
		if got := checkStream(t, []byte(tc.body), resolve, tensor.Limits{}); got != tc.undecided {
			t.Errorf("%s: undecided = %v, want %v", tc.body, got, tc.undecided)
		}
	}
}

// TestStreamInstanceDumps: an instance object that misses an input is
// dumped from its kept text when short, and by the dump-only decoder when
// longer than instRawMax (whatever its first tokens look like).
func TestStreamInstanceDumps(t *testing.T) {
	nums := strings.Repeat("1.5, ", instRawMax/4) + "2"
	space := strings.Repeat(" ", instRawMax+10)
	sig := sigOf("a:FP32", "s:BYTES")
	for _, body := range []string{
		`{"instances": [{"a": [1, 2], "s": "x"}, {"a": [` + nums + `]}]}`,
		`{"instances": [{"a": [` + nums + `]}]}`,
		`{"instances": [{` + space + `"a"` + space + `:` + space + `[1, 2]}]}`,
		`{"instances": [{"s": "` + strings.Repeat("q", instRawMax+5) + `", "z": 1}]}`,
		`{"instances": [{"s": "` + strings.Repeat("q", instRawMax+5) + `"}]}`,
		`{"instances": [{"a": 1, "s": "x"}, {"s": "y"` + space + `}]}`,
	} {
		if checkStream(t, []byte(body), fixed(sig), tensor.Limits{}) {
			t.Errorf("%.60s…: undecided", body)
		}
	}
}

// TestStreamFixedPrecision: image rows written at a fixed precision, which
// the decoder's number loop reads in same-shape runs, one value of another
// length somewhere, in every chunking and as FP32 and FP64: the tensors
// are Parse's.
func TestStreamFixedPrecision(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	lim := tensor.Limits{MaxDepth: 16, MaxElements: 1 << 12}
	for range 60 {
		prec, sep := 1+r.IntN(8), []string{", ", ","}[r.IntN(2)]
		odd := r.IntN(2 * 6 * 3)
		var b strings.Builder
		b.WriteString(`{"instances": [`)
		for i := range 2 * 6 * 3 { // two instances of 6×3
			switch {
			case i == 0:
				b.WriteString("[[")
			case i%18 == 0:
				b.WriteString("]]" + sep + "[[")
			case i%3 == 0:
				b.WriteString("]" + sep + "[")
			default:
				b.WriteString(sep)
			}
			v, p := r.Float64()*10-5, prec
			if i == odd {
				p = prec%8 + 1
			}
			b.WriteString(strconv.FormatFloat(v, 'f', p, 64))
		}
		b.WriteString("]]]}")
		for _, sig := range []*tensor.Signature{sigOf("x:FP32"), sigOf("x:FP64")} {
			if checkStream(t, []byte(b.String()), fixed(sig), lim) {
				t.Errorf("%q: undecided", b.String())
			}
		}
	}
}
