// Package e2e holds tfsbridge's end-to-end tests and its whole-path
// benchmark. Everything runs in process over real loopback sockets:
//
//	TF client (net/http) → envoysim (the Envoy stand-in) → tfsbridge extproc (gRPC) → mockv2
//	TF client (net/http) → tfsbridge proxy (httpproxy)                          → mockv2
//
// The servers are assembled by package proxy/bridge, the same code
// cmd/tfsbridge runs (bridge.New, Listen, Serve, with the binary's flag
// defaults), so a wiring mistake there shows up here. One
// table of cases (cases_test.go) runs over both transports and against
// the mock imitating Triton, KServe and MLServer; each case asserts the
// status, the exact body bytes and the content-type, and every test ends
// by checking that the Envoy stand-in saw no ext_proc protocol violation.
//
// The TFSBRIDGE_E2E_* variables (external_test.go) point the table and the
// classify/regress vectors at a real v2 server and real Envoys instead:
// what .github/workflows/interop.yaml does with Triton, MLServer and KServe.
//
// The package has no non-test code: this file only documents it.
package e2e
