package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/comparerun"
	"github.com/tfsbridge/tfsbridge/internal/fileread"
	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
	"github.com/tfsbridge/tfsbridge/translate/tfcompare"
)

const compareSummary = `Replays TF Serving REST requests against two endpoints and compares the answers in
TF terms: each output's name, shape and dtype, max and p99 absolute and relative error,
NaN/Inf positions, classify's top-1 label; errors by status. An endpoint is tf:URL (a
TF Serving REST base URL) or v2:URL[,kind=triton|kserve|mlserver][,map=FILE] (a v2
server, reached through tfsbridge's translation run in-process, with an optional model
map). Requests come from a JSONL file (--requests, one {"model", "verb", "body"} per
line) or are generated from each --model's signature (--generate N). Prints a per-model,
per-output table; --report writes it as an HTML page with an error histogram per output.
Exits 0 when every answer is within tolerance, 1 when one is not (or the run fails), 2
on a usage error.`

// compareOptions are the flags of "tfsbridge compare".
type compareOptions struct {
	log                  logOptions
	reference, candidate string
	requestsFile         string
	generate             int
	models               []string
	seed                 int64
	batch                int
	format               string
	tol                  tfcompare.Tolerance
	concurrency          int
	timeout              time.Duration
	maxBody, maxFile     int64
	maxRequests          int
	report               string
	progress             bool
	endpointA, endpointB comparerun.Endpoint
}

func newCompareOptions() *compareOptions {
	return &compareOptions{
		log:         defaultLog(),
		seed:        1,
		batch:       2,
		format:      "inputs",
		tol:         tfcompare.DefaultTolerance,
		concurrency: 4,
		timeout:     30 * time.Second,
		maxBody:     64 << 20,
		maxFile:     256 << 20,
		maxRequests: 100000,
		progress:    true,
	}
}

// Every flag but the log's has the command's own variable
// (TFSBRIDGE_COMPARE_*): its meaning is compare's alone.
func (o *compareOptions) bindings() []binding {
	bs := []binding{
		stringFlag(&o.reference, "reference", "Endpoint A, the reference the error is relative to: tf:URL (TF Serving REST) or v2:URL[,kind=triton|kserve|mlserver][,map=FILE] (a v2 server, through tfsbridge in-process, with an optional model map)."),
		stringFlag(&o.candidate, "candidate", "Endpoint B, the one checked against the reference (same forms)."),
		fileFlag(&o.requestsFile, "requests", "JSONL file of requests to replay, one {\"model\": M, \"verb\": \"predict\"|\"classify\"|\"regress\", \"body\": {...}} per line, with an optional \"version\" or \"label\"."),
		intFlag(&o.generate, "generate", "Instead of --requests, generate this many predict requests per --model from its signature (GET /v1/models/M/metadata on the reference), with seeded random values."),
		listFlag(&o.models, "model", "Model to --generate requests for (repeatable, or comma-separated)."),
		int64Flag(&o.seed, "seed", "Seed of --generate's random values: the same seed gives the same requests."),
		intFlag(&o.batch, "batch", "Size --generate gives a -1 dimension (the batch)."),
		enumFlag(&o.format, "format", "Format of --generate's requests: inputs (TF's columnar {\"inputs\": {...}}) or instances (the row format, one item per batch element; every input needs a -1 batch dimension).", []string{"inputs", "instances"}, nil),
		floatFlag(&o.tol.Abs, "tolerance-abs", "Absolute tolerance: b matches a when |a-b| <= abs + rel*|a|."),
		floatFlag(&o.tol.Rel, "tolerance-rel", "Relative tolerance (see --tolerance-abs)."),
		intFlag(&o.concurrency, "concurrency", "Requests in flight at once (each sent to both endpoints together)."),
		durationFlag(&o.timeout, "timeout", "Timeout of each request to an endpoint."),
		sizeFlag(&o.maxBody, "max-body-bytes", "Largest answer read from an endpoint, a `size`; also the in-process tfsbridge's body limit."),
		sizeFlag(&o.maxFile, "max-requests-bytes", "Largest --requests file read, a `size`."),
		intFlag(&o.maxRequests, "max-requests", "Most requests replayed or generated in one run."),
		stringFlag(&o.report, "report", "Also write the table and an error histogram per output to this self-contained HTML file."),
		boolFlag(&o.progress, "progress", "Draw a progress bar on stderr when it is a terminal."),
	}
	for i := range bs {
		bs[i] = bs[i].commandEnv()
	}
	return append(bs, o.log.bindings()...)
}

// floatFlag binds a finite float64.
func floatFlag(p *float64, name, help string) binding {
	return bind(p, name, "float", help, func(s string) (float64, error) {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, errors.New("want a finite number such as 1e-5")
		}
		return f, nil
	}, func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) })
}

// listFlag binds a repeatable, comma-separated list of names.
func listFlag(p *[]string, name, help string) binding {
	return bind(p, name, "strings", help, func(s string) ([]string, error) {
		out := slices.Clone(*p)
		for item := range strings.SplitSeq(s, ",") {
			if item = strings.TrimSpace(item); item != "" && !slices.Contains(out, item) {
				out = append(out, item)
			}
		}
		return out, nil
	}, func(v []string) string { return strings.Join(v, ",") })
}

func (o *compareOptions) check() error {
	var err error
	switch {
	case o.reference == "":
		return &flagProblem{"reference", "is required: tf:URL or v2:URL"}
	case o.candidate == "":
		return &flagProblem{"candidate", "is required: tf:URL or v2:URL"}
	case (o.requestsFile == "") == (o.generate == 0):
		return &flagProblem{"requests", "or --generate N: give exactly one"}
	case o.generate < 0:
		return &flagProblem{"generate", "must be positive"}
	case o.generate > 0 && len(o.models) == 0:
		return &flagProblem{"model", "is required with --generate: the models to generate requests for"}
	case o.generate > 0 && int64(o.generate)*int64(len(o.models)) > int64(o.maxRequests):
		return &flagProblem{"generate", fmt.Sprintf("makes %d requests, more than --max-requests %d", o.generate*len(o.models), o.maxRequests)}
	case o.batch < 1:
		return &flagProblem{"batch", "must be at least 1"}
	case o.tol.Abs < 0:
		return &flagProblem{"tolerance-abs", "must not be negative"}
	case o.tol.Rel < 0:
		return &flagProblem{"tolerance-rel", "must not be negative"}
	case o.concurrency < 1 || o.concurrency > 1024:
		return &flagProblem{"concurrency", "must be from 1 to 1024"}
	case o.timeout <= 0:
		return &flagProblem{"timeout", "must be positive"}
	case o.maxBody < 1:
		return &flagProblem{"max-body-bytes", "must be positive"}
	case o.maxRequests < 1:
		return &flagProblem{"max-requests", "must be positive"}
	}
	if o.report != "" {
		if fi, err := os.Stat(filepath.Dir(o.report)); err != nil || !fi.IsDir() {
			return &flagProblem{"report", fmt.Sprintf("%q: its directory does not exist", o.report)}
		}
	}
	if o.endpointA, err = comparerun.ParseEndpoint(o.reference); err != nil {
		return &flagProblem{"reference", err.Error()}
	}
	if o.endpointB, err = comparerun.ParseEndpoint(o.candidate); err != nil {
		return &flagProblem{"candidate", err.Error()}
	}
	for _, e := range []struct {
		flag string
		ep   comparerun.Endpoint
	}{{"reference", o.endpointA}, {"candidate", o.endpointB}} {
		if e.ep.Map == "" {
			continue
		}
		if _, err := modelmap.Load(e.ep.Map); err != nil {
			return &flagProblem{e.flag, "map: " + err.Error()}
		}
	}
	return nil
}

func (o *compareOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	// The in-process bridges log their start and stop at info: noise in
	// a report, so at the default level they log warnings only.
	quiet := o.log
	if strings.EqualFold(quiet.level, "info") {
		quiet.level = "warn"
	}
	log, err := quiet.logger(stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	baseA, stopA, err := o.endpointA.Start(ctx, log, o.maxBody)
	if err != nil {
		return err
	}
	defer stopA()
	baseB, stopB, err := o.endpointB.Start(ctx, log, o.maxBody)
	if err != nil {
		return err
	}
	defer stopB()
	client := &http.Client{Timeout: o.timeout}
	var reqs []comparerun.Request
	if o.requestsFile != "" {
		data, err := fileread.Read(o.requestsFile, o.maxFile)
		if err != nil {
			return err
		}
		if reqs, err = comparerun.ParseRequests(data, o.maxRequests); err != nil {
			return fmt.Errorf("%s: %w", o.requestsFile, err)
		}
	} else {
		reqs, err = comparerun.Generate(ctx, client, baseA, comparerun.GenerateOptions{
			Models: o.models, N: o.generate, Seed: uint64(o.seed), Batch: o.batch, MaxElements: o.maxBody / 2,
			Instances: o.format == "instances",
		})
		if err != nil {
			return fmt.Errorf("generate: %w", err)
		}
	}
	ro := comparerun.Options{
		A: baseA, B: baseB, NameA: o.reference, NameB: o.candidate, Tolerance: o.tol,
		Concurrency: o.concurrency, Client: client, MaxBodyBytes: o.maxBody,
	}
	if o.progress && isTerminal(stderr) {
		ro.Progress = comparerun.NewBar(stderr).Update
	}
	rep, err := comparerun.Run(ctx, reqs, ro)
	if err != nil {
		return err
	}
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if o.report != "" {
		if err := writeReport(o.report, rep); err != nil {
			return err
		}
	}
	if !rep.Passed() {
		return fmt.Errorf("%d of %d requests over tolerance", rep.Mismatches, rep.Requests)
	}
	return nil
}

// writeReport writes the HTML page next to its final name, then renames
// it: a CI job never picks up half a page.
func writeReport(path string, rep *comparerun.Report) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".compare-*.html")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer os.Remove(f.Name())
	err = rep.WriteHTML(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
