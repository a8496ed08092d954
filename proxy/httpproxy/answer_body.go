package httpproxy

import (
	"net"
	"net/http"
	"strconv"

	"github.com/tfsbridge/tfsbridge/translate"
)

// setAnswer makes a translated answer, handed over in place
// (session.ResponseParts), resp's body: ReverseProxy reads its parts
// where the translator wrote them, and its Close, once the body has been
// copied to the client (or the copy failed), releases them.
func setAnswer(resp *http.Response, ans translate.Answer) {
	b := &answerBody{ans: ans}
	b.rest = append(b.arr[:0], ans.Parts()...)
	resp.Body = b
	resp.ContentLength = int64(ans.Len())
	resp.TransferEncoding = nil
	resp.Uncompressed = false
	resp.Header.Set("Content-Length", strconv.Itoa(ans.Len()))
}

// answerBody reads a translated answer's parts and releases them at
// Close, exactly once; nothing reads them afterwards (a Read after Close
// is EOF).
type answerBody struct {
	ans  translate.Answer
	rest net.Buffers
	arr  [1][]byte // rest's room for the usual one part
}

func (b *answerBody) Read(p []byte) (int, error) { return b.rest.Read(p) }

func (b *answerBody) Close() error {
	b.rest = nil
	b.ans.Release()
	return nil
}
