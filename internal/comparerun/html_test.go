package comparerun

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// voidElements have no end tag in HTML.
var voidElements = map[string]bool{"meta": true, "br": true, "link": true, "img": true, "input": true, "hr": true}

// checkWellFormed tokenizes page strictly: every element closed in order
// (SVG's self-closing ones too), no script, nothing loaded from elsewhere.
func checkWellFormed(t *testing.T, page []byte) {
	t.Helper()
	z := html.NewTokenizer(bytes.NewReader(page))
	var open []string
	for {
		tt := z.Next()
		tok := z.Token()
		switch tt {
		case html.ErrorToken:
			if !errors.Is(z.Err(), io.EOF) {
				t.Fatal(z.Err())
			}
			if len(open) != 0 {
				t.Fatalf("unclosed elements %v", open)
			}
			return
		case html.StartTagToken:
			if tok.Data == "script" {
				t.Fatal("the page has a script")
			}
			for _, a := range tok.Attr {
				if (a.Key == "src" || a.Key == "href") && a.Val != "" {
					t.Fatalf("<%s %s=%q> loads something", tok.Data, a.Key, a.Val)
				}
			}
			if !voidElements[tok.Data] {
				open = append(open, tok.Data)
			}
		case html.EndTagToken:
			if len(open) == 0 || open[len(open)-1] != tok.Data {
				t.Fatalf("</%s> closes %v", tok.Data, open)
			}
			open = open[:len(open)-1]
		}
	}
}

// The report's table has a row per output with the table's numbers, and
// one SVG histogram per output (none for the error row), each with bars.
func TestWriteHTML(t *testing.T) {
	base := startTF(t, nil)
	reqs, err := Generate(t.Context(), testClient, base, GenerateOptions{
		Models: []string{"half_plus_two", "multi_out"}, N: 3, Seed: 1, Batch: 2, MaxElements: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rep := runAgainst(t, append(reqs, classifyRequests...), map[string]float64{"half_plus_two": 0.25})
	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	checkWellFormed(t, page.Bytes())
	doc, err := html.Parse(bytes.NewReader(page.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	svgs := map[string]int{} // model/output → <svg> count
	bars := map[string]int{} // model/output → non-empty bars
	var walk func(n *html.Node, figure string)
	walk = func(n *html.Node, figure string) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "tr":
				if n.Parent != nil && n.Parent.Data == "tbody" {
					var cells []string
					for c := n.FirstChild; c != nil; c = c.NextSibling {
						if c.Type == html.ElementNode && c.Data == "td" {
							cells = append(cells, strings.TrimSpace(text(c)))
						}
					}
					rows = append(rows, cells)
				}
			case "figure":
				figure = attr(n, "data-model") + "/" + attr(n, "data-output")
			case "svg":
				svgs[figure]++
			case "rect":
				if h := attr(n, "height"); h != "0" && h != "" {
					bars[figure]++
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, figure)
		}
	}
	walk(doc, "")
	want := map[string][]string{
		"half_plus_two/outputs":    {"half_plus_two", "outputs", "float", "3", "0", "0", "3", "0.25", "0.25"},
		"multi_out/sum":            {"multi_out", "sum", "float", "3", "3", "0", "0", "0", "0"},
		"multi_out/label_bytes":    {"multi_out", "label_bytes", "bytes", "3", "3", "0", "0", "-", "-"},
		"multi_out/argmax":         {"multi_out", "argmax", "int", "3", "3", "0", "0", "0", "0"},
		"linear_classifier/scores": {"linear_classifier", "scores", "float", "1", "1", "0", "0", "0", "0"},
		"no_such_model/(error)":    {"no_such_model", "(error)", "", "1", "1", "0", "0", "-", "-"},
	}
	if len(rows) != 8 { // + linear_classifier/classes, linear_regressor/results
		t.Errorf("%d table rows, want 8: %q", len(rows), rows)
	}
	for _, r := range rows {
		key := r[0] + "/" + r[1]
		if w, ok := want[key]; ok {
			if strings.Join(r[:len(w)], "|") != strings.Join(w, "|") {
				t.Errorf("row %s = %q, want %q", key, r[:len(w)], w)
			}
			delete(want, key)
		}
		if r[1] == ErrorRow {
			if svgs[key] != 0 {
				t.Errorf("the error row has %d histograms", svgs[key])
			}
			continue
		}
		if svgs[key] != 1 || bars[key] == 0 {
			t.Errorf("%s: %d <svg>, %d bars; want one histogram with bars", key, svgs[key], bars[key])
		}
	}
	if len(want) != 0 {
		t.Errorf("rows missing: %v", want)
	}
	if len(svgs) != 7 {
		t.Errorf("%d histograms, want 7 (one per output): %v", len(svgs), svgs)
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(text(c))
	}
	return b.String()
}
