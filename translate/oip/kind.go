package oip

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// ServerKind is the v2 server implementation behind the proxy. It decides
// the request encoding: the binary extension for Triton and KServe, JSON
// only for MLServer.
//
// The zero value is Triton, the reference implementation, so a caller that
// never set a kind gets the most capable encoding.
type ServerKind uint8

// The supported v2 servers.
const (
	Triton ServerKind = iota
	KServe
	MLServer
)

// String returns the name used in flags and in GET /v2: "triton",
// "kserve" or "mlserver".
func (k ServerKind) String() string {
	switch k {
	case Triton:
		return "triton"
	case KServe:
		return "kserve"
	case MLServer:
		return "mlserver"
	}
	return "ServerKind(" + strconv.Itoa(int(k)) + ")"
}

// ParseServerKind parses a flag value: "triton", "kserve" or "mlserver"
// (case-insensitive). It is a configuration error, not a client's, so the
// error is a plain one.
func ParseServerKind(s string) (ServerKind, error) {
	if k, ok := kindByName(s); ok {
		return k, nil
	}
	return 0, fmt.Errorf("v2: unknown server kind %q (want triton, kserve or mlserver)", s)
}

func kindByName(s string) (ServerKind, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "triton":
		return Triton, true
	case "kserve":
		return KServe, true
	case "mlserver":
		return MLServer, true
	}
	return 0, false
}

// KindFromServerMetadata detects the server from the body of GET /v2,
// whose "name" is "triton", "kserve" or "mlserver" on the three servers
// (docs/open-inference-protocol.md §2). Other servers cannot be assumed to speak any dialect, so an
// unknown name is an error asking for an explicit kind.
func KindFromServerMetadata(body []byte) (ServerKind, error) {
	var meta struct {
		Name *string `json:"name"`
	}
	if err := json.Unmarshal(body, &meta); err != nil {
		return 0, apierr.Wrap(apierr.BadGateway, err, "invalid server metadata from inference server: not a JSON object")
	}
	if meta.Name == nil {
		return 0, apierr.New(apierr.BadGateway, "invalid server metadata from inference server: no \"name\"")
	}
	k, ok := kindByName(*meta.Name)
	if !ok {
		return 0, apierr.Errorf(apierr.BadGateway,
			"unrecognised inference server %q: set the server kind (triton, kserve or mlserver) explicitly", clip(*meta.Name, 64))
	}
	return k, nil
}
