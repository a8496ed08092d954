package session

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"
)

// errTooLarge reports a decoded body over the size limit.
var errTooLarge = errors.New("decoded body exceeds the size limit")

// decodeRequestBody applies TF Serving's request decoding: when the
// Content-Encoding contains "gzip" anywhere, the body is gunzipped (TF caps
// it at 100 MiB; we cap it at the body limit). Like TF, a body that fails
// to gunzip becomes empty, so the client sees "The document is empty".
// Any other encoding is ignored and the bytes are parsed as they are.
func decodeRequestBody(encoding string, body []byte, limit int64) ([]byte, error) {
	if !strings.Contains(encoding, "gzip") {
		return body, nil
	}
	out, err := inflate(body, limit, gunzip)
	if errors.Is(err, errTooLarge) {
		return nil, err
	}
	if err != nil {
		return nil, nil
	}
	return out, nil
}

// decodeResponseBody undoes a v2 server's response compression. tfsbridge
// asks for identity, but Triton honours its own Accept-Encoding rules and
// a middle box may compress anyway; gzip and deflate (zlib, as Triton
// sends it) are understood, anything else is an error.
func decodeResponseBody(encoding string, body []byte, limit int64) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "", "identity":
		return body, nil
	case "gzip", "x-gzip":
		return inflate(body, limit, gunzip)
	case "deflate":
		return inflate(body, limit, func(r io.Reader) (io.ReadCloser, error) { return zlib.NewReader(r) })
	}
	return nil, fmt.Errorf("unsupported content-encoding %q", encoding)
}

func gunzip(r io.Reader) (io.ReadCloser, error) { return gzip.NewReader(r) }

// inflate decompresses body with open, reading at most limit+1 bytes so a
// compression bomb costs no more than the limit.
func inflate(body []byte, limit int64, open func(io.Reader) (io.ReadCloser, error)) ([]byte, error) {
	zr, err := open(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("decompress body: %w", err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, fmt.Errorf("decompress body: %w", err)
	}
	if int64(len(out)) > limit {
		return nil, errTooLarge
	}
	return out, nil
}
