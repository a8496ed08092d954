//go:build !tfsbridge_poison

package tfresponse

// poisonReleased is set by the tfsbridge_poison build tag: Release then
// overwrites the body's memory before pooling it, so that a transport
// still reading pieces it was handed (Body.Pieces) after their release
// sends garbage the byte-for-byte tests see. Off, it costs nothing.
const poisonReleased = false

func poison([]byte) {}
