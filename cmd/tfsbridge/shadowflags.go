package main

import "github.com/tfsbridge/tfsbridge/proxy/bridge"

// shadowBindings are the bounds of the model map's shadow comparison
// (`shadow:` blocks); the per-model settings are in the map.
func shadowBindings(o *bridge.Options) []binding {
	return []binding{
		sizeFlag(&o.Shadow.MaxBytes, "shadow-max-bytes", "Memory all shadow copies (the model map's shadow blocks) hold together, a `size`: request bodies and both answers. A copy that does not fit is not sent, counted as dropped."),
		durationFlag(&o.Shadow.Timeout, "shadow-timeout", "Timeout of one shadow copy's call to its shadow server; a stalled shadow holds its max_inflight slot no longer. Never delays the client's answer."),
		sizeFlag(&o.Shadow.LogMaxBytes, "shadow-log-max-bytes", "Size cap of each shadow mismatch_log file, a `size`; once reached, mismatches are only counted and logged."),
		floatFlag(&o.Shadow.LogPerSecond, "shadow-log-rate", "Mismatch lines written to each shadow mismatch_log file per second at most (bursts of as many); the others are counted and logged."),
	}
}
