package deploy

import "time"

// What the binary, docs/architecture.md and the Envoy spec fix; the manifests must agree
// with these and with each other.
const (
	tfsPort     = 8501 // TF Serving's REST port, Envoy's listener
	tfGRPCPort  = 8500 // TF Serving's gRPC port, Envoy's TF gRPC listener
	v2GRPCPort  = 8001 // Triton's gRPC port in every example
	extProcPort = 9002 // tfsbridge extproc --grpc-addr default
	// extProcSocket is the sidecar's ext_proc Unix socket: envoy.yaml's
	// pipe, tfsbridge's --grpc-addr=unix://<it>, in a volume both mount.
	extProcSocket    = "/var/run/tfsbridge/extproc.sock"
	metricsPort      = 9090 // tfsbridge --metrics-addr default (/metrics, /healthz, /readyz)
	v2Port           = 8000 // Triton's HTTP port in every example
	envoyAdminPort   = 9901 // Envoy admin, loopback only
	envoyHealthPort  = 9902 // Envoy's own readiness listener
	distrolessUID    = 65532
	extProcHealthSvc = "envoy.service.ext_proc.v3.ExternalProcessor"

	// minBufferLimit is the least buffer limit that lets image-sized bodies
	// through BUFFERED ext_proc (Envoy's default is 1 MiB, Envoy Gateway's
	// 32 KiB).
	minBufferLimit = 16 << 20
	// minStreams is the least circuit-breaker limit on the ext_proc cluster:
	// each in-flight request holds one stream, and Envoy's default of 1024
	// overflows (docs/envoy-extproc.md, "Timeouts and limits").
	minStreams = 4096
	// minMessageTimeout replaces Envoy's 200 ms default (docs/envoy-extproc.md, "Timeouts and limits").
	minMessageTimeout = time.Second
	// tfDeadline is the route timeout of TF requests: tfsbridge's
	// --request-timeout default (the reverse proxy's deadline), so that
	// both transports answer 504 at the same time.
	tfDeadline = 30 * time.Second

	tfsbridgeImage = "ghcr.io/tfsbridge/tfsbridge"

	// serverHeader is the request header tfsbridge names a mapped model's
	// v2 server in (proxy/session.HeaderServer; importing that package
	// would pull the tracing exporters into this module).
	serverHeader = "x-tfsbridge-server"
)

// tfsbridgeFlags lists the flags of the subcommands the manifests run (all
// written --name=value); each is also read from TFSBRIDGE_<NAME_IN_SNAKE>.
var tfsbridgeFlags = map[string][]string{
	"extproc": {"grpc-addr", "metrics-addr", "backend", "backend-kind", "max-body-bytes", "log-format", "log-level",
		"model-map", "tls-cert-file", "tls-key-file", "tls-client-ca-file",
		"readiness", "drain-delay", "shutdown-timeout", "drain-envoy", "body-mode"},
	"mock": {"http-addr", "grpc-addr", "kind", "log-format", "log-level"},
}

// Defaults of the shutdown flags (bridge.DefaultOptions).
const (
	defaultDrainDelay      = 5 * time.Second
	defaultShutdownTimeout = 15 * time.Second
	// defaultGracePeriod is Kubernetes' terminationGracePeriodSeconds.
	defaultGracePeriod = 30 * time.Second
)

// backendKinds are the values --backend-kind accepts.
var backendKinds = []string{"auto", "triton", "kserve", "mlserver"}
