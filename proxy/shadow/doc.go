// Package shadow is tfsbridge's shadow comparison (model map `shadow:`):
// a sampled copy of a TF request goes, in the background, to another
// server, and that server's TF answer is compared with the primary's in
// TF terms (translate/tfcompare) with the model's tolerance.
//
// The session (proxy/session/shadow.go) samples an exchange at its
// request headers, keeps its request body and the primary's final TF
// answer within the engine's memory cap, and hands both to Submit when
// the exchange completes. The engine never makes the primary wait:
// Submit starts the copy on its own goroutine or drops it — when
// max_inflight copies of the model are running, or when the copy's bytes
// do not fit the memory cap — and counts it; nothing is ever queued.
//
// A copy reaches its server translated for the server's kind: a v2
// server through tfsbridge's own translation (translate's pipelines, the
// server's proxy/backend client for its kind and signatures), a TF
// Serving server (kind tfserving) with the TF REST request as it came.
// A plain-http server is called with tfsbridge's own HTTP/1.1 client
// (proxy/internal/http1, through direct.go: pooled keep-alive
// connections, one writev per request, the timeout as a connection
// deadline); an https one through Options.Transport.
//
// Results are counted in tfsbridge_shadow_comparisons_total{model,result}
// and tfsbridge_shadow_worst_relative_error; mismatches are logged
// (rate-limited) and appended to the model's mismatch_log, a JSONL file
// capped in size and in lines per second (mismatchlog.go).
package shadow
