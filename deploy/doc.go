// Package deploy holds tfsbridge's deployment material and the tests that
// keep it honest; it has no Go API.
//
// The material itself is YAML: the Envoy sidecar bootstrap (envoy/), a
// kustomize base for the sidecar pod (kubernetes/), a shared ext_proc
// service (extproc/) used by the Envoy Gateway (envoy-gateway/) and Istio
// (istio/) add-ons. The tests decode every file strictly into the real API
// types (Envoy's protos, Kubernetes, Gateway API, Envoy Gateway, Istio),
// render each kustomization the way `kubectl apply -k` does, and check that
// ports, names, labels, flags and limits agree across files, with the
// Dockerfile and with the decisions in docs/architecture.md.
package deploy
