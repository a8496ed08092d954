// Package robustness proves tfsbridge's house rule under attack: every
// bad input gets a clear TF-style error with a sensible status, and
// nothing crashes, hangs, leaks or allocates without bound.
//
// The package holds only tests, in three layers:
//
//   - pure_test.go: hostile bodies, paths and tensors fed to the pure
//     translators (tfrequest.Parse, the predict pipeline's Request and
//     Response, v2.DecodeResponse, v2.ParseModelMetadata and
//     ApplyTritonConfig, route.Parse, tfresponse.Predict). Each case
//     states the error it must get and a bound on the bytes it may
//     allocate, as a multiple of its input size plus a constant, measured
//     with runtime.MemStats; fuzz_test.go seeds fuzz targets with them.
//   - sockets_test.go, hostile_test.go: the same bombs over real sockets,
//     through both transports (the standalone proxy, and the ext_proc
//     service behind test/envoysim), in front of internal/mockv2 and in front
//     of a hostile v2 server (garbage headers, lying lengths, endless and
//     slow bodies, 1xx/204/304, connections cut mid-body). Every answer
//     must come within a deadline; goroutines return to their baseline and
//     the heap stays flat across repeated bad requests.
//   - concurrency_test.go, slowclient_test.go: many concurrent mixed
//     requests (run with -race), one backend fetch per model under
//     concurrent metadata misses, clients that trickle or never finish
//     their bodies, and clients that never read their answers.
//   - panic_test.go: a panic injected into one exchange (session, readiness
//     check, shared metadata fetch) answers that exchange only, while
//     others are in flight on the same servers.
//   - memory_test.go: the heap high-water mark of the most amplifying
//     bodies against the admission factors, and the in-flight budget's
//     503 through both transports.
//   - admission_test.go, streaming_test.go: the budget's age rule under
//     bursts (fixed and random, on all three transports), bodies declared
//     but never sent, stalled bodies that must give way, clients that
//     never read through ext_proc, and every body shape's heap against
//     what it reserved.
//
// testing.Short skips only the soak parts (the repeated-request heap
// checks and the concurrency runs).
package robustness
