package oip

import (
	"slices"
	"sync"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
)

// pullPool keeps the readers' memory between responses.
var pullPool = sync.Pool{New: func() any { return new(jsontext.Pull) }}

// own returns a string token's contents where they stay: in the text when
// they have no escapes, else a copy.
func own(tok jsontext.Token) []byte {
	if tok.InChunk {
		return tok.Str[:len(tok.Str):len(tok.Str)]
	}
	return slices.Clone(tok.Str)
}
