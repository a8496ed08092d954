package oip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDecodeError(t *testing.T) {
	long := strings.Repeat("é", 5000)
	cases := []struct {
		name        string
		status      int
		contentType string
		body        string
		want        string
	}{
		{"triton error", 400, "application/json", `{"error":"Request for unknown model: 'm' is not found"}`, "Request for unknown model: 'm' is not found"},
		{"kserve error", 404, "application/json", `{"error":"Model with name m does not exist."}`, "Model with name m does not exist."},
		{"error with escapes", 500, "", `{"error":"ValueError : bad \"x\"\n"}`, `ValueError : bad "x"`},
		{"non-string error", 500, "application/json", `{"error":{"code":3}}`, `{"code":3}`},
		{"fastapi not found", 404, "application/json", `{"detail":"Not Found"}`, "Not Found"},
		{"fastapi validation", 422, "application/json",
			`{"detail":[{"type":"enum","loc":["body","inputs",0,"datatype"],"msg":"Input should be 'BOOL' or 'BYTES'","input":"INT322"},{"loc":["body","id"],"msg":"Input should be a valid string"}]}`,
			"body.inputs.0.datatype: Input should be 'BOOL' or 'BYTES'; body.id: Input should be a valid string"},
		{"fastapi detail without loc", 422, "", `{"detail":[{"msg":"bad"}]}`, "bad"},
		{"message key", 503, "application/json", `{"message":"no healthy upstream"}`, "no healthy upstream"},
		{"other json", 500, "application/json", `{"foo":1}`, `{"foo":1}`},
		{"broken json", 500, "application/json", `{"error":`, `{"error":`},
		{"plain text", 500, "text/plain; charset=utf-8", "Internal Server Error\n", "Internal Server Error"},
		{"html", 502, "text/html", "<html><head><title>502 Bad Gateway</title></head>\n<body><h1>Bad   Gateway</h1></body></html>", "502 Bad Gateway Bad Gateway"},
		{"html sniffed", 503, "", "<p>upstream connect error</p>", "upstream connect error"},
		{"empty", 503, "", "", "Service Unavailable"},
		{"whitespace", 404, "text/plain", " \n", "Not Found"},
		{"null error", 400, "application/json", `{"error":null}`, "Bad Request"},
		{"empty html", 500, "text/html", "<html></html>", "Internal Server Error"},
		{"unknown status", 599, "", "", "HTTP status 599"},
		{"invalid utf8", 500, "text/plain", "bad \xff byte", "bad \uFFFD byte"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := DecodeError(tc.status, tc.contentType, []byte(tc.body)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	// Bounded, and cut on a rune boundary.
	for _, body := range []string{long, `{"error":"` + long + `"}`, "<b>" + long + "</b>"} {
		got := DecodeError(500, "", []byte(body))
		if len(got) > maxErrorLen || !utf8.ValidString(got) || !strings.HasSuffix(got, "...") {
			t.Errorf("long body: %d bytes, valid UTF-8 %v, suffix %q", len(got), utf8.ValidString(got), got[len(got)-3:])
		}
	}
}
