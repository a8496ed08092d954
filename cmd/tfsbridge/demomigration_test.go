package main

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDemoMigration runs the demo and each command of its migration block
// as a user would paste it: the split loop (counts within binomial
// bounds), the sticky loop (one answer), the shadow counter (the split's
// converted answers compared with TF Serving's) and the offline compare (exit 1, the
// drifted output in its table).
func TestDemoMigration(t *testing.T) {
	out := startDemo(t, "127.0.0.1:0").out
	_, section, ok := strings.Cut(out, "\nMigration:")
	if !ok {
		t.Fatalf("no migration section in:\n%s", out)
	}
	section, _, _ = strings.Cut(section, "\ngRPC:")

	loops := regexp.MustCompile(`(?m)^  for i in \$\(seq (\d+)\); do curl -s (?:-H '([^:]+): ([^']*)' )?-d '([^']*)' -X POST (http://\S+) \| tr -d ' \\n'; echo; done \| sort \| uniq -c$`).FindAllStringSubmatch(section, -1)
	metrics := regexp.MustCompile(`(?m)^  curl -s (http://\S+/metrics) \| grep (\S+)$`).FindAllStringSubmatch(section, -1)
	compare := regexp.MustCompile(`(?m)^  tfsbridge (compare .*)$`).FindAllStringSubmatch(section, -1)
	if len(loops) != 2 || loops[0][2] != "" || loops[1][2] != "x-user-id" || len(metrics) != 1 || len(compare) != 1 {
		t.Fatalf("want a split loop, a sticky loop, a metrics curl and a compare command in:\n%s", section)
	}
	const tfAnswer, convertedAnswer = `{"predictions":[2.5]}`, `{"predictions":[2.501]}`

	// The split: 90/10, so the converted model's count is binomial
	// (n, 0.1); 4.5 standard deviations either side fail once in about
	// 150,000 runs.
	counts := pasteLoop(t, loops[0])
	n := float64(atoi(t, loops[0][1]))
	mean, sd := 0.1*n, math.Sqrt(n*0.1*0.9)
	if c := float64(counts[convertedAnswer]); len(counts) != 2 || c < mean-4.5*sd || c > mean+4.5*sd {
		t.Errorf("split loop counted %v, want %s about %.0f±%.0f times and %s the rest", counts, convertedAnswer, mean, 4.5*sd, tfAnswer)
	}
	// Sticky: one user, one server, every time.
	if counts := pasteLoop(t, loops[1]); len(counts) != 1 || (counts[tfAnswer] == 0 && counts[convertedAnswer] == 0) {
		t.Errorf("sticky loop counted %v, want one answer of the two", counts)
	}

	// The shadow: each converted answer of the loops is compared with TF
	// Serving's in the background; wait for the counter.
	mismatches := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metrics[0][2]) + `\{model="half_plus_two_split",result="mismatch"\} ([1-9]\d*)$`)
	var page string
	deadline := time.Now().Add(30 * time.Second) // generous: the copy runs on a busy machine
	for !mismatches.MatchString(page) {
		if time.Now().After(deadline) {
			t.Fatalf("no shadow mismatch counted; the metrics grep shows:\n%s", grep(page, metrics[0][2]))
		}
		page = getText(t, metrics[0][1])
	}

	// The offline compare: exit 1, the drifted output's row.
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), strings.Fields(compare[0][1]), envOf(nil), &stdout, &stderr); code != 1 {
		t.Errorf("%s exited %d, want 1; stdout:\n%s\nstderr:\n%s", compare[0][0], code, stdout.String(), stderr.String())
	}
	if !regexp.MustCompile(`(?m)^half_plus_two\s+outputs\s+float\s+50\s+0\s+0\s+50\s+0\.001\s`).MatchString(stdout.String()) {
		t.Errorf("compare's table lacks half_plus_two's drifted output (50 mismatches, max abs 0.001):\n%s", stdout.String())
	}
}

// pasteLoop sends a printed loop's requests as curl does and counts the
// answers as "tr -d ' \n' | sort | uniq -c" does. m is the loop's match:
// count, header name and value (or ""), body, URL.
func pasteLoop(t *testing.T, m []string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for range atoi(t, m[1]) {
		req, err := http.NewRequest(http.MethodPost, m[5], strings.NewReader(m[4]))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // curl -d
		if m[2] != "" {
			req.Header.Set(m[2], m[3])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		counts[strings.NewReplacer(" ", "", "\n", "").Replace(string(body))]++
	}
	return counts
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// getText is the body of GET url.
func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// grep is text's lines that contain s.
func grep(text, s string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
