package translate

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/test/conformance"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// streamCase is one v2 response body to translate both whole and
// streamed. late marks an error the stream may only find after it has
// emitted bytes (the body is cut short or runs on past its blocks).
type streamCase struct {
	name   string
	body   []byte
	hl     int
	m      Pipeline
	ex     Exchange
	lim    tensor.Limits
	late   bool
	pieces int // when set, the least number of pieces out must receive
}

// whole translates c the way the non-streaming path does.
func (c streamCase) whole() ([]byte, error) {
	return c.pipe().Response(c.body, c.hl, c.ex, c.lim)
}

// pipe is the case's pipeline: predict unless m is set.
func (c streamCase) pipe() Pipeline {
	if c.m.verb == 0 {
		return predict
	}
	return c.m
}

// streamCases are the bodies of TestTranslateResponse,
// TestTranslateResponseErrors and TestTranslateExamplesResponse, and more
// that exercise the stream's stages: outputs whose blocks arrive in
// another order than they are written, BYTES blocks, JSON data in a
// binary body, every fixed-size datatype, empty tensors, header errors
// after a block, bodies cut short or too long, a body of many pieces.
func streamCases() []streamCase {
	row, col := Exchange{Format: tfjson.Row}, Exchange{Format: tfjson.Columnar}
	sig := &tensor.Signature{Model: "m", Outputs: []tensor.Spec{{Name: "y", DataType: tensor.FP32, Shape: []int64{-1, 2}}}, Batched: true}
	var cases []streamCase
	add := func(name string, outs []respOut, ex Exchange) {
		body, hl := respBody(outs)
		cases = append(cases, streamCase{name: name, body: body, hl: hl, ex: ex})
	}
	bin := []respOut{{"y", "FP32", []int64{2, 2}, respFP32(2.5, 3, 0.1, 1e6)}}
	add("binary, row", bin, Exchange{Format: tfjson.Row, Signature: sig})
	add("binary, columnar", bin, Exchange{Format: tfjson.Columnar, Signature: sig})
	multi := []respOut{{"y", "FP32", []int64{3}, respFP32(1, 2, 3)}, {"label_bytes", "BYTES", nil, respBytes("cat")}}
	add("unbatched, row", multi, Exchange{Format: tfjson.Row, Unbatched: true})
	add("unbatched, columnar", multi, Exchange{Format: tfjson.Columnar, Unbatched: true})
	ragged := []respOut{{"a", "FP32", []int64{2}, respFP32(1, 2)}, {"b", "FP32", []int64{3}, respFP32(1, 2, 3)}}
	add("row, ragged batch", ragged, row)
	add("columnar, ragged batch", ragged, col)
	add("row, scalar output", []respOut{{"s", "FP32", nil, respFP32(1)}}, row)
	// Blocks in reverse name order: "a" is written first, its block comes last.
	rev := []respOut{
		{"z", "INT64", []int64{2, 3}, le64(1, -2, 3, math.MaxInt64, -5, 6)},
		{"m", "BYTES", []int64{2}, respBytes("x\"y", "\x00\n")},
		{"a", "FP32", []int64{2, 2}, respFP32(0.5, float32(math.NaN()), float32(math.Inf(-1)), 7)},
	}
	add("row, three outputs, blocks in reverse order", rev, row)
	add("columnar, three outputs, blocks in reverse order", rev, col)
	types := []respOut{
		{"b", "BOOL", []int64{2, 2}, []byte{1, 0, 0, 1}},
		{"f16", "FP16", []int64{2, 1}, []byte{0x00, 0x3c, 0x00, 0xc0}},
		{"bf16", "BF16", []int64{2, 1}, []byte{0x80, 0x3f, 0x00, 0x40}},
		{"f64", "FP64", []int64{2, 1}, le64(int64(math.Float64bits(0.1)), int64(math.Float64bits(-3)))},
		{"i8", "INT8", []int64{2, 2}, []byte{0x80, 1, 2, 0xff}},
		{"i16", "INT16", []int64{2}, []byte{0, 0x80, 1, 0}},
		{"i32", "INT32", []int64{2}, []byte{0, 0, 0, 0x80, 9, 0, 0, 0}},
		{"u8", "UINT8", []int64{2}, []byte{255, 0}},
		{"u16", "UINT16", []int64{2}, []byte{255, 255, 0, 1}},
		{"u32", "UINT32", []int64{2}, []byte{255, 255, 255, 255, 0, 0, 0, 1}},
		{"u64", "UINT64", []int64{2}, le64(-1, 1)},
		{"s", "BYTES", []int64{2, 1}, respBytes("plain", "")},
	}
	add("row, every datatype", types, row)
	add("columnar, every datatype", types, col)
	add("single output, columnar, INT32", types[6:7], col)
	add("empty tensors", []respOut{{"e", "FP32", []int64{2, 0, 3}, nil}, {"f", "BYTES", []int64{2, 0}, nil}}, row)
	add("empty tensor, columnar", []respOut{{"e", "INT8", []int64{3, 0}, nil}}, col)
	add("bad datatype after a block", []respOut{{"a", "FP32", []int64{1}, respFP32(1)}, {"b", "FP33", []int64{1}, respFP32(2)}}, row)
	add("size mismatch after a block", []respOut{{"a", "FP32", []int64{1}, respFP32(1)}, {"b", "FP32", []int64{2}, respFP32(2)}}, row)
	add("bad datatype first", []respOut{{"b", "FP33", []int64{1}, respFP32(2)}, {"a", "FP32", []int64{1}, respFP32(1)}}, row)
	add("bad BYTES block", []respOut{{"a", "FP32", []int64{1}, respFP32(1)}, {"s", "BYTES", []int64{1}, []byte{9, 0, 0, 0, 'x'}}}, row)
	add("bad BYTES block before a translate error", []respOut{{"s", "BYTES", []int64{1}, []byte{9, 0, 0, 0, 'x'}}, {"a", "FP32", nil, respFP32(1)}}, row)
	add("duplicate names", []respOut{{"a", "FP32", []int64{1}, respFP32(1)}, {"a", "FP32", []int64{1}, respFP32(1)}}, row)

	good, goodLen := respBody([]respOut{{"y", "FP32", []int64{2}, respFP32(1, 2)}})
	cases = append(cases,
		streamCase{name: "truncated binary block", body: good[:len(good)-1], hl: goodLen, ex: row, late: true},
		streamCase{name: "bytes past the last block", body: append(append([]byte(nil), good...), 1, 2, 3), hl: goodLen, ex: row, late: true},
		streamCase{name: "body ends inside the header", body: good[:goodLen-3], hl: goodLen, ex: row},
		streamCase{name: "header length 0", body: good, hl: 0, ex: row},
		streamCase{name: "not JSON", body: []byte("<html>"), hl: -1, ex: row},
		streamCase{name: "no outputs", body: []byte(`{"outputs":[]}`), hl: -1, ex: row},
		streamCase{name: "JSON only", body: []byte(`{"outputs":[{"name":"y","datatype":"INT64","shape":[2],"data":[9007199254740993,-1]}]}`), hl: -1, ex: row},
		streamCase{name: "header only, ragged", body: good[:goodLen], hl: goodLen, ex: row, late: true},
		streamCase{name: "over the output limit", body: good, hl: goodLen, ex: row, lim: tensor.Limits{MaxOutputBytes: 20}},
		streamCase{name: "data over the output limit", body: good, hl: goodLen, ex: row, lim: tensor.Limits{MaxOutputBytes: 7}},
		streamCase{name: "data over the output limit, cut short", body: good[:len(good)-2], hl: goodLen, ex: row, lim: tensor.Limits{MaxOutputBytes: 7}},
	)
	mixed := []byte(`{"outputs":[{"name":"j","datatype":"INT32","shape":[2],"data":[4,5]},` +
		`{"name":"k","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]}`)
	cases = append(cases, streamCase{name: "JSON data in a binary body", body: append(append([]byte(nil), mixed...), respFP32(1.5, 2.5)...), hl: len(mixed), ex: row})

	// A body of many pieces: an image-sized single output, row and
	// columnar, and several outputs in row format.
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]float32, 64*64*3)
	for i := range vals {
		vals[i] = r.Float32()
	}
	img := []respOut{{"p", "FP32", []int64{1, 64, 64, 3}, respFP32(vals...)}}
	for _, ex := range []Exchange{row, col} {
		body, hl := respBody(img)
		cases = append(cases, streamCase{name: fmt.Sprintf("image, format %v", ex.Format), body: body, hl: hl, ex: ex, pieces: 2})
	}
	two, twoLen := respBody([]respOut{{"p", "FP32", []int64{64, 64, 3}, respFP32(vals...)}, {"q", "FP32", []int64{64, 64, 3}, respFP32(vals...)}})
	cases = append(cases, streamCase{name: "two large outputs, row", body: two, hl: twoLen, ex: row, pieces: 4})

	// TestTranslateExamplesResponse's bodies.
	scoresOnly := &tensor.Signature{Inputs: []tensor.Spec{examplesIn}, Outputs: []tensor.Spec{{Name: "scores", DataType: tensor.FP32}}}
	for _, e := range []struct {
		name string
		m    Pipeline
		sig  *tensor.Signature
		outs []respOut
		n    int
	}{
		{"classify", classify, classifier, []respOut{
			{"classes", "BYTES", []int64{1, 2}, respBytes("no", "yes")},
			{"scores", "FP32", []int64{1, 2}, respFP32(0.25, 0.75)},
			{"extra", "INT64", []int64{1}, make([]byte, 8)}}, 1},
		{"classify, scores first", classify, classifier, []respOut{
			{"scores", "FP32", []int64{3, 2}, respFP32(0.25, 0.75, 0.5, 0.5, 1, 0)},
			{"classes", "BYTES", []int64{3, 2}, respBytes("a", "b", "c", "d", "e", "f")}}, 3},
		{"classify, scores only", classify, scoresOnly, []respOut{{"scores", "FP32", []int64{1, 2}, respFP32(0.25, 0.75)}}, 1},
		{"classify, a declared output missing", classify, classifier, []respOut{{"scores", "FP32", []int64{1, 2}, respFP32(0.25, 0.75)}}, 1},
		{"classify, wrong batch", classify, scoresOnly, []respOut{{"scores", "FP32", []int64{2, 1}, respFP32(0.25, 0.75)}}, 1},
		{"regress [N,1]", regress, regressor, []respOut{{"outputs", "FP32", []int64{1, 1}, respFP32(4.5)}}, 1},
		{"regress [N]", regress, regressor, []respOut{{"outputs", "FP32", []int64{3}, respFP32(4.5, -1, 1e-9)}}, 3},
		{"regress, outputs missing", regress, regressor, []respOut{{"y", "FP32", []int64{1}, respFP32(4.5)}}, 1},
	} {
		body, hl := respBody(e.outs)
		cases = append(cases, streamCase{name: e.name, body: body, hl: hl, m: e.m, ex: Exchange{Signature: e.sig, Examples: e.n}})
	}
	return cases
}

func le64(vs ...int64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// runStream feeds body to a ResponseStream in chunks cut at cuts (sorted
// offsets), through one reused buffer scribbled over after each Write (the
// stream must not keep a chunk). It returns the TF bytes, the error, and
// the pieces out received.
func runStream(t testing.TB, c streamCase, cuts []int) ([]byte, int, *ResponseStream, error) {
	var got []byte
	pieces, short := 0, 0
	s := c.pipe().NewResponseStream(c.hl, c.ex, c.lim, func(p []byte) error {
		// Every piece is full but the last.
		if len(p) == 0 || len(p) > tfresponse.PieceSize || short > 0 {
			t.Fatalf("piece of %d bytes after %d short ones", len(p), short)
		}
		if len(p) < tfresponse.PieceSize {
			short++
		}
		got = append(got, p...)
		pieces++
		return nil
	})
	buf := make([]byte, len(c.body))
	prev := 0
	var err error
	for _, cut := range append(cuts, len(c.body)) {
		chunk := buf[:copy(buf, c.body[prev:cut])]
		prev = cut
		if err = s.Write(chunk); err != nil {
			break
		}
		for i := range chunk {
			chunk[i] = 0xA5
		}
	}
	if err == nil {
		err = s.Close()
	}
	if s.Emitted() != int64(len(got)) {
		t.Errorf("Emitted() = %d, out received %d bytes", s.Emitted(), len(got))
	}
	return got, pieces, s, err
}

// sameResult reports how the stream's result differs from the whole-body
// one, or "".
func sameResult(want []byte, wantErr error, got []byte, err error) string {
	if wantErr != nil {
		we, e := apierr.As(wantErr), apierr.As(err)
		if err == nil || e.Code != we.Code || e.Msg != we.Msg {
			return fmt.Sprintf("error %v, want %v", err, wantErr)
		}
		return ""
	}
	if err != nil {
		return fmt.Sprintf("error %v, want the body %q", err, want)
	}
	if string(got) != string(want) {
		return fmt.Sprintf("body\n got %q\nwant %q", got, want)
	}
	return ""
}

func evenCuts(n, size int) []int {
	var cuts []int
	for c := size; c < n; c += size {
		cuts = append(cuts, c)
	}
	return cuts
}

// TestResponseStream: for every case and chunk size, the stream writes the
// whole-body translation's bytes or returns its error, and an error
// found before the binary section is complete and well framed leaves
// nothing emitted.
func TestResponseStream(t *testing.T) {
	for _, c := range streamCases() {
		want, wantErr := c.whole()
		for _, size := range []int{1, 2, 7, 64, 4096, len(c.body) + 1} {
			t.Run(fmt.Sprintf("%s/%d", c.name, size), func(t *testing.T) {
				got, pieces, s, err := runStream(t, c, evenCuts(len(c.body), size))
				if diff := sameResult(want, wantErr, got, err); diff != "" {
					t.Fatal(diff)
				}
				if err != nil && !c.late && s.Emitted() != 0 {
					t.Errorf("error %v after %d bytes were emitted", err, s.Emitted())
				}
				if pieces < c.pieces {
					t.Errorf("%d pieces, want at least %d", pieces, c.pieces)
				}
				if err != nil && !errors.Is(s.Write([]byte{1}), err) {
					t.Error("the error is not sticky")
				}
			})
		}
	}
}

// TestResponseStreamEarly: a single-output body is written as its bytes
// arrive, and a final header error is returned by the Write that
// completes the header.
func TestResponseStreamEarly(t *testing.T) {
	vals := make([]float32, 32<<10)
	for i := range vals {
		vals[i] = float32(i) / 7
	}
	for _, ex := range []Exchange{{Format: tfjson.Row}, {Format: tfjson.Columnar}} {
		body, hl := respBody([]respOut{{"p", "FP32", []int64{1, 32, 1024}, respFP32(vals...)}})
		s := predict.NewResponseStream(hl, ex, tensor.Limits{}, func([]byte) error { return nil })
		if err := s.Write(body[:hl+len(vals)*2]); err != nil {
			t.Fatal(err)
		}
		if s.Emitted() == 0 {
			t.Errorf("format %v: nothing emitted with half the data in", ex.Format)
		}
		if err := s.Close(); err == nil || apierr.As(err).Code != apierr.BadGateway {
			t.Errorf("format %v: truncated body closed with %v", ex.Format, err)
		}
	}

	body, hl := respBody([]respOut{{"b", "FP33", []int64{1}, respFP32(2)}, {"a", "FP32", []int64{1}, respFP32(1)}})
	s := predict.NewResponseStream(hl, Exchange{Format: tfjson.Row}, tensor.Limits{}, func([]byte) error { return nil })
	if err := s.Write(body[:hl]); err == nil || apierr.As(err).Code != apierr.BadGateway {
		t.Errorf("header with an unknown datatype: Write returned %v", err)
	}
}

// TestResponseStreamOutError: an error from out stops the stream and is
// returned as is.
func TestResponseStreamOutError(t *testing.T) {
	body, hl := respBody([]respOut{{"y", "FP32", []int64{2}, respFP32(1, 2)}})
	stop := errors.New("client gone")
	calls := 0
	s := predict.NewResponseStream(hl, Exchange{Format: tfjson.Row}, tensor.Limits{}, func([]byte) error { calls++; return stop })
	err := s.Write(body)
	if err == nil {
		err = s.Close()
	}
	if !errors.Is(err, stop) {
		t.Fatalf("%v, want the out error", err)
	}
	if err := s.Write(nil); !errors.Is(err, stop) || calls != 1 {
		t.Errorf("after the out error: %v, %d calls", err, calls)
	}
}

// FuzzResponseStream: any body, split at random points, streams to the
// whole-body translation's bytes or error, for predict in both formats
// and for classify and regress (mode).
func FuzzResponseStream(f *testing.F) {
	for _, c := range streamCases() {
		if c.ex.Signature == nil && len(c.body) < 4096 {
			mode := uint8(0)
			if c.ex.Format == tfjson.Columnar {
				mode = 1
			}
			f.Add(c.body, int32(c.hl), mode, c.ex.Unbatched, uint8(1), uint64(len(c.body)))
		}
		if c.m.verb != 0 {
			f.Add(c.body, int32(c.hl), uint8(c.m.verb), false, uint8(c.ex.Examples), uint64(len(c.body)))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, hl int32, mode uint8, unbatched bool, examples uint8, seed uint64) {
		c := streamCase{body: body, hl: int(hl), ex: Exchange{Format: tfjson.Row, Unbatched: unbatched}}
		switch mode % 4 {
		case 1:
			c.ex.Format = tfjson.Columnar
		case 2:
			c.m, c.ex = classify, Exchange{Signature: classifier, Examples: int(examples)}
		case 3:
			c.m, c.ex = regress, Exchange{Signature: regressor, Examples: int(examples)}
		}
		want, wantErr := c.whole()
		r := rand.New(rand.NewPCG(seed, 0))
		var cuts []int
		for p := 0; len(body) > 0; {
			p += 1 + r.IntN(max(1, min(len(body), 1<<(seed%12))))
			if p >= len(body) {
				break
			}
			cuts = append(cuts, p)
		}
		got, _, _, err := runStream(t, c, cuts)
		if diff := sameResult(want, wantErr, got, err); diff != "" {
			t.Fatalf("cuts %v: %s", cuts, diff)
		}
	})
}

// TestResponseStreamConformance streams the v2 response bodies of the
// conformance vectors that give one as text and binary blocks, in both
// formats, against the whole-body translation.
func TestResponseStreamConformance(t *testing.T) {
	ran, ok := 0, 0
	for _, c := range conformance.MustLoad(t, "oip_cases.json") {
		for _, raw := range []json.RawMessage{c.Input, c.Expected} {
			var v struct {
				JSONText  string `json:"json_text"`
				BinaryHex string `json:"binary_hex"`
			}
			if json.Unmarshal(raw, &v) != nil || !strings.Contains(v.JSONText, `"outputs"`) {
				continue
			}
			bin, err := hex.DecodeString(v.BinaryHex)
			if err != nil {
				t.Fatalf("%s: %v", c.ID, err)
			}
			hl := -1
			if len(bin) > 0 {
				hl = len(v.JSONText)
			}
			for _, f := range []tfjson.Format{tfjson.Row, tfjson.Columnar} {
				sc := streamCase{body: append([]byte(v.JSONText), bin...), hl: hl, ex: Exchange{Format: f}}
				want, wantErr := sc.whole()
				if wantErr == nil {
					ok++
				}
				for _, size := range []int{1, 7, 4096} {
					got, _, _, err := runStream(t, sc, evenCuts(len(sc.body), size))
					if diff := sameResult(want, wantErr, got, err); diff != "" {
						t.Errorf("%s, format %v, chunks of %d: %s", c.ID, f, size, diff)
					}
				}
			}
			ran++
			break
		}
	}
	t.Logf("%d vectors, %d translations succeed", ran, ok)
	if ran < 5 || ok < 2*ran-2 {
		t.Fatalf("%d vectors carry a response body, %d translations succeed", ran, ok)
	}
}

// TestResponseStreamMemory: streaming an image answer allocates its v2
// binary data and about one piece, not its TF text (three times larger).
func TestResponseStreamMemory(t *testing.T) {
	body, hl, ex := imageResponse()
	data := len(body) - hl
	run := func() int64 {
		var n int64
		s := predict.NewResponseStream(hl, ex, tensor.Limits{}, func(p []byte) error { n += int64(len(p)); return nil })
		for p := 0; p < len(body); p += 16 << 10 {
			if err := s.Write(body[p:min(p+16<<10, len(body))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	text := run() // warms the pools
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 5
	for range runs {
		run()
	}
	runtime.ReadMemStats(&after)
	perRun := int64(after.TotalAlloc-before.TotalAlloc) / runs
	t.Logf("%d bytes allocated per stream of %d data bytes, %d bytes of text", perRun, data, text)
	if limit := int64(data) + 3*tfresponse.PieceSize; perRun > limit || text < 3*int64(data) {
		t.Errorf("%d bytes allocated per stream of %d data bytes (limit %d) for %d bytes of text", perRun, data, limit, text)
	}
}
