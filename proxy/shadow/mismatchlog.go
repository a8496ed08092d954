package shadow

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/tfsbridge/tfsbridge/translate/tfcompare"
)

// maxLoggedBody is the largest body a mismatch line carries; a larger one
// is replaced by {"omitted_bytes": N}, so one line stays readable and the
// file's cap holds many mismatches, not one.
const maxLoggedBody = 256 << 10

// record is one mismatch: a line of the JSONL file.
//
//	{"time": "…", "model": "mnist", "verb": "predict", "request_id": "…",
//	 "server": "onnx", "problem": "…",
//	 "worst": {"output": "scores", "index": [0, 3], "flat_index": 3,
//	           "primary": 0.25, "shadow": 0.251, "abs_error": 0.001, "rel_error": 0.004},
//	 "outputs": [{"name": "scores", "verdict": "mismatch", "elements": 10, "over": 10,
//	              "max_abs": 0.001, "max_rel": 0.004, "non_finite": 0, "problem": ""}],
//	 "request": {…}, "primary": {"status": 200, "body": {…}}, "shadow": {"status": 200, "body": {…}}}
//
// Bodies are embedded as JSON when they are JSON, else as strings.
type record struct {
	Time      string       `json:"time"`
	Model     string       `json:"model"`
	Verb      string       `json:"verb"`
	RequestID string       `json:"request_id,omitempty"`
	Server    string       `json:"server"`
	Problem   string       `json:"problem,omitempty"`
	Worst     *worst       `json:"worst,omitempty"`
	Outputs   []outputLine `json:"outputs,omitempty"`
	Request   body         `json:"request"`
	Primary   answerLine   `json:"primary"`
	Shadow    answerLine   `json:"shadow"`
}

// worst is the element of all outputs with the largest relative error.
type worst struct {
	Output    string  `json:"output"`
	Index     []int64 `json:"index"`
	FlatIndex int     `json:"flat_index"`
	Primary   number  `json:"primary"`
	Shadow    number  `json:"shadow"`
	AbsError  number  `json:"abs_error"`
	RelError  number  `json:"rel_error"`
}

type outputLine struct {
	Name           string `json:"name"`
	Verdict        string `json:"verdict"`
	Problem        string `json:"problem,omitempty"`
	Elements       int    `json:"elements"`
	Over           int    `json:"over"`
	MaxAbs         number `json:"max_abs"`
	MaxRel         number `json:"max_rel"`
	NonFinite      int    `json:"non_finite"`
	FirstNonFinite int    `json:"first_non_finite"`
	Top1Total      int    `json:"top1_total,omitempty"`
	Top1Agree      int    `json:"top1_agree,omitempty"`
}

type answerLine struct {
	Status int  `json:"status"`
	Body   body `json:"body"`
}

// number is a float that JSON can carry when it is not finite ("+Inf",
// "-Inf", "NaN" as strings).
type number float64

func (n number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte(strconv.Quote(strconv.FormatFloat(f, 'g', -1, 64))), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// body is a body in a mismatch line.
type body []byte

func (b body) MarshalJSON() ([]byte, error) {
	switch {
	case len(b) > maxLoggedBody:
		return fmt.Appendf(nil, `{"omitted_bytes":%d}`, len(b)), nil
	case json.Valid(b):
		return b, nil
	}
	return json.Marshal(string(b))
}

// newRecord describes a mismatch.
func newRecord(c *Copy, shadow tfcompare.Answer, r *tfcompare.Result) *record {
	rec := &record{
		Time: time.Now().UTC().Format(time.RFC3339Nano), Model: c.Route.Model, Verb: c.Route.Verb.String(),
		RequestID: c.RequestID, Server: c.Target.Name, Problem: r.Problem,
		Request: c.Request,
		Primary: answerLine{c.Primary.Status, c.Primary.Body},
		Shadow:  answerLine{shadow.Status, shadow.Body},
	}
	for i := range r.Outputs {
		o := &r.Outputs[i]
		rec.Outputs = append(rec.Outputs, outputLine{Name: o.Name, Verdict: o.Verdict.String(), Problem: o.Problem,
			Elements: o.Elements, Over: o.Over, MaxAbs: number(o.MaxAbs), MaxRel: number(o.MaxRel),
			NonFinite: o.NonFinite, FirstNonFinite: o.FirstNonFinite, Top1Total: o.Top1Total, Top1Agree: o.Top1Agree})
		if o.Worst < 0 {
			continue
		}
		rel := relError(o.WorstA, o.WorstB)
		if rec.Worst == nil || rel > float64(rec.Worst.RelError) {
			rec.Worst = &worst{Output: o.Name, Index: unflatten(o.Worst, o.ShapeA), FlatIndex: o.Worst,
				Primary: number(o.WorstA), Shadow: number(o.WorstB), AbsError: number(math.Abs(o.WorstA - o.WorstB)), RelError: number(rel)}
		}
	}
	return rec
}

func relError(a, b float64) float64 {
	d := math.Abs(a - b)
	if d == 0 {
		return 0
	}
	return d / math.Abs(a)
}

// unflatten turns a flat row-major index into one index per dimension.
func unflatten(flat int, shape []int64) []int64 {
	idx := make([]int64, len(shape))
	rest := int64(flat)
	for i := len(shape) - 1; i >= 0; i-- {
		if d := shape[i]; d > 0 {
			idx[i] = rest % d
			rest /= d
		}
	}
	return idx
}

// logAttrs are the attributes of a mismatch's log line.
func (r *record) logAttrs() []any {
	attrs := []any{"model", r.Model, "verb", r.Verb, "server", r.Server, "request_id", r.RequestID,
		"primary_status", r.Primary.Status, "shadow_status", r.Shadow.Status}
	if r.Problem != "" {
		attrs = append(attrs, "problem", r.Problem)
	}
	if w := r.Worst; w != nil {
		attrs = append(attrs, "output", w.Output, "index", w.Index, "primary", float64(w.Primary), "shadow", float64(w.Shadow),
			"rel_error", float64(w.RelError))
	}
	return attrs
}

// mismatchLog is one mismatch_log file: lines appended within a size cap
// and a rate (a token bucket of perSecond lines a second, bursts of as
// many). It is opened on the first line; a file that cannot be opened is
// reported once and retried no sooner than a minute later.
type mismatchLog struct {
	path      string
	maxBytes  int64
	perSecond float64
	log       *slog.Logger

	mu       sync.Mutex
	f        *os.File
	size     int64
	tokens   float64
	last     time.Time
	retry    time.Time // when a failed open may be tried again
	full     bool      // the cap was reached (reported once)
	limited  int       // lines left out by the rate since the last report
	reported time.Time
}

func newMismatchLog(path string, maxBytes int64, perSecond float64, log *slog.Logger) *mismatchLog {
	return &mismatchLog{path: path, maxBytes: maxBytes, perSecond: perSecond, log: log, tokens: perSecond}
}

// write appends rec, unless the rate or the cap says no.
func (l *mismatchLog) write(rec *record) {
	line, err := json.Marshal(rec)
	if err != nil {
		l.log.Warn("shadow: a mismatch could not be written", "file", l.path, "error", err)
		return
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !l.last.IsZero() {
		l.tokens = min(l.perSecond, l.tokens+now.Sub(l.last).Seconds()*l.perSecond)
	}
	l.last = now
	if l.tokens < 1 {
		l.limited++
		if now.Sub(l.reported) > 10*time.Second {
			l.reported = now
			l.log.Warn("shadow: mismatch lines left out of the file by --shadow-log-rate", "file", l.path, "left_out", l.limited)
			l.limited = 0
		}
		return
	}
	l.tokens--
	if !l.open(now) {
		return
	}
	if l.size+int64(len(line)) > l.maxBytes {
		if !l.full {
			l.full = true
			l.log.Warn("shadow: the mismatch log reached --shadow-log-max-bytes; further mismatches are only counted and logged",
				"file", l.path, "max_bytes", l.maxBytes)
		}
		return
	}
	n, err := l.f.Write(line)
	l.size += int64(n)
	if err != nil {
		l.log.Warn("shadow: writing the mismatch log failed", "file", l.path, "error", err)
	}
}

// open opens the file for appending, on first use; it refuses anything
// but a regular file (a FIFO would block the writer).
func (l *mismatchLog) open(now time.Time) bool {
	if l.f != nil {
		return true
	}
	if now.Before(l.retry) {
		return false
	}
	err := func() error {
		if fi, err := os.Lstat(l.path); err == nil && !fi.Mode().IsRegular() {
			return errors.New("not a regular file")
		}
		f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		l.f, l.size = f, fi.Size()
		return nil
	}()
	if err != nil {
		l.retry = now.Add(time.Minute)
		l.log.Warn("shadow: cannot open the mismatch log; mismatches are only counted and logged", "file", l.path, "error", err)
		return false
	}
	return true
}

func (l *mismatchLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}
