package comparerun

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/translate/tfcompare"
)

// startMock serves a v2 mock for the test and returns its URL.
func startMock(t testing.TB, perturb map[string]float64) string {
	t.Helper()
	s, err := mockv2.New(mockv2.Options{Kind: "triton", Perturb: perturb})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL
}

// startTF puts an in-process tfsbridge in front of a mock (perturbed as
// given) and returns its TF REST base URL.
func startTF(t testing.TB, perturb map[string]float64) string {
	t.Helper()
	e, err := ParseEndpoint("v2:" + startMock(t, perturb) + ",kind=triton")
	if err != nil {
		t.Fatal(err)
	}
	base, stop, err := e.Start(context.Background(), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return base
}

// testClient's timeout is generous: a busy 2-core machine, not a hang,
// is what it must survive.
var testClient = &http.Client{Timeout: 30 * time.Second}

// runAgainst replays reqs against an unperturbed and a perturbed mock.
func runAgainst(t testing.TB, reqs []Request, perturb map[string]float64) *Report {
	t.Helper()
	a, b := startTF(t, nil), startTF(t, perturb)
	rep, err := Run(context.Background(), reqs, Options{A: a, B: b, NameA: "A", NameB: "B", Tolerance: tfcompare.DefaultTolerance,
		Concurrency: 3, Client: testClient, MaxBodyBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// row finds a model's output row.
func row(t testing.TB, rep *Report, model, output string) *Row {
	t.Helper()
	for _, m := range rep.Models {
		if m.Model != model {
			continue
		}
		for _, r := range m.Rows {
			if r.Output == output {
				return r
			}
		}
	}
	t.Fatalf("no row %s/%s", model, output)
	return nil
}
