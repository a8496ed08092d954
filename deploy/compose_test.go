package deploy

import (
	"context"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	appsv1 "k8s.io/api/apps/v1"
)

const composeFile = "compose/compose.yaml"

// loadCompose loads the compose file as `docker compose` does (the
// compose-spec schema, interpolation, normalisation, relative paths made
// absolute), offline: nothing is pulled, built or run.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	dir, err := filepath.Abs(filepath.Dir(composeFile))
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, filepath.Base(composeFile))}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) { o.ResolvePaths = true })
	if err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	return p
}

// composeFlags parses a tfsbridge service's command: the subcommand, then
// --name=value flags the subcommand has.
func composeFlags(t *testing.T, name string, cmd []string) (string, map[string]string) {
	t.Helper()
	if len(cmd) == 0 {
		t.Fatalf("%s: no command; the subcommand must be explicit", name)
	}
	known, ok := tfsbridgeFlags[cmd[0]]
	if !ok {
		t.Fatalf("%s: unknown subcommand %q", name, cmd[0])
	}
	flags := map[string]string{}
	for _, arg := range cmd[1:] {
		flag, value, ok := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if !strings.HasPrefix(arg, "--") || !ok || !slices.Contains(known, flag) {
			t.Errorf("%s: %q is not a --name=value flag of %s", name, arg, cmd[0])
			continue
		}
		flags[flag] = value
	}
	return cmd[0], flags
}

// TestCompose checks deploy/compose: the three services of the Envoy path
// load, and Envoy's bootstrap (deploy/envoy/envoy.yaml, mounted as is)
// agrees with them: its ext_proc pipe is tfsbridge's --grpc-addr socket in
// a volume both mount, its v2 cluster is the mock's --http-addr, its
// listeners and tfsbridge's metrics are published, and all three share
// the network namespace that makes the bootstrap's 127.0.0.1 mean the
// same host.
func TestCompose(t *testing.T) {
	p := loadCompose(t)
	svc := func(name string) types.ServiceConfig {
		t.Helper()
		s, err := p.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	mock, extproc, envoy := svc("mock"), svc("extproc"), svc("envoy")
	if len(p.Services) != 3 {
		t.Errorf("services %v, want mock, extproc and envoy", p.ServiceNames())
	}

	// The Envoy of the sidecar pod, with the bootstrap the pod mounts.
	d := one[appsv1.Deployment](t, kustomizeBuild(t, "kubernetes"), "model-server")
	podEnvoy, ok := containerNamed(d.Spec.Template.Spec.Containers, "envoy")
	if !ok || envoy.Image != podEnvoy.Image {
		t.Errorf("envoy image %s, want the sidecar pod's %s", envoy.Image, podEnvoy.Image)
	}
	config := argAfter(envoy.Command, "-c")
	var bootstrapPath string
	for _, v := range envoy.Volumes {
		if v.Target == config {
			bootstrapPath = v.Source
			if !v.ReadOnly {
				t.Errorf("envoy mounts %s writable", config)
			}
		}
	}
	want, _ := filepath.Abs("envoy/envoy.yaml")
	if bootstrapPath != want {
		t.Fatalf("envoy -c %s is %q, want deploy/envoy/envoy.yaml mounted there", config, bootstrapPath)
	}
	b, err := parseBootstrap(readFile(t, "envoy/envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := checkSidecarBootstrap(t, b, buffered)

	// One network namespace: the mock's, where the ports are published.
	for _, c := range []types.ServiceConfig{extproc, envoy} {
		if c.NetworkMode != "service:mock" {
			t.Errorf("%s: network_mode %q, want service:mock (the bootstrap's 127.0.0.1 is the pod's loopback)", c.Name, c.NetworkMode)
		}
		if len(c.Ports) > 0 {
			t.Errorf("%s: ports are published by the namespace's owner, mock", c.Name)
		}
	}
	published := map[uint32]bool{}
	for _, pc := range mock.Ports {
		host, _ := strconv.Atoi(pc.Published)
		if host != int(pc.Target) {
			t.Errorf("mock publishes %d as %s: keep the documented port", pc.Target, pc.Published)
		}
		published[pc.Target] = true
	}

	// tfsbridge: the image built from this checkout's Dockerfile, the
	// socket Envoy dials, the mock as its backend, metrics published.
	for _, c := range []types.ServiceConfig{mock, extproc} {
		if c.Build == nil || c.Build.Dockerfile != "Dockerfile" || c.Build.Context != mustAbs(t, "..") {
			t.Errorf("%s: build %+v, want the repository's Dockerfile", c.Name, c.Build)
		}
		if c.Image != mock.Image {
			t.Errorf("%s: image %s, want the one image built (%s)", c.Name, c.Image, mock.Image)
		}
	}
	sub, flags := composeFlags(t, "extproc", extproc.Command)
	if sub != "extproc" {
		t.Fatalf("extproc runs %q", sub)
	}
	sock, ok := strings.CutPrefix(flags["grpc-addr"], "unix://")
	if pipe := s.extProcAddr.GetPipe().GetPath(); !ok || sock != pipe {
		t.Errorf("tfsbridge --grpc-addr=%s, Envoy dials the pipe %s", flags["grpc-addr"], pipe)
	}
	volume := func(c types.ServiceConfig, dir string) string {
		for _, v := range c.Volumes {
			if v.Type == types.VolumeTypeVolume && path.Clean(v.Target) == dir && !v.ReadOnly {
				return v.Source
			}
		}
		return ""
	}
	if a, b := volume(extproc, path.Dir(sock)), volume(envoy, path.Dir(sock)); a == "" || a != b {
		t.Errorf("the socket's directory %s: volume %q in extproc, %q in envoy; want one writable named volume in both", path.Dir(sock), a, b)
	} else if v := p.Volumes[a]; !strings.Contains(v.DriverOpts["o"], "uid="+strconv.Itoa(distrolessUID)) {
		t.Errorf("volume %s: driver_opts %v; want it owned by uid %d, the user tfsbridge creates its socket as", a, v.DriverOpts, distrolessUID)
	}
	if envoy.User != strconv.Itoa(distrolessUID)+":"+strconv.Itoa(distrolessUID) {
		t.Errorf("envoy user %q, want %d:%d (the socket volume's owner)", envoy.User, distrolessUID, distrolessUID)
	}
	u, err := url.Parse(flags["backend"])
	backend := net.JoinHostPort(s.backendAddr.GetAddress(), strconv.Itoa(int(s.backendAddr.GetPortValue())))
	if err != nil || u.Scheme != "http" || u.Host != backend {
		t.Errorf("tfsbridge --backend=%s, Envoy's v2 cluster is %s", flags["backend"], backend)
	}
	if kind := flags["backend-kind"]; kind != "" && !slices.Contains(backendKinds, kind) {
		t.Errorf("--backend-kind=%s", kind)
	}
	_, metrics, _ := net.SplitHostPort(flags["metrics-addr"])
	if m, _ := strconv.Atoi(metrics); !published[uint32(m)] {
		t.Errorf("tfsbridge --metrics-addr=%s is not published", flags["metrics-addr"])
	}

	// The mock: the v2 server Envoy's cluster and tfsbridge's --backend reach.
	sub, flags = composeFlags(t, "mock", mock.Command)
	if sub != "mock" || flags["http-addr"] != backend {
		t.Errorf("mock runs %q --http-addr=%s, want mock on %s", sub, flags["http-addr"], backend)
	}
	for _, port := range append(slices.Clone(s.listenerPorts), s.readyPort) {
		if !published[port] {
			t.Errorf("Envoy's listener on %d is not published", port)
		}
	}
	if !published[tfsPort] {
		t.Errorf("TF Serving's port %d is not published", tfsPort)
	}
	// The admin port stays on loopback.
	if published[envoyAdminPort] {
		t.Errorf("Envoy's admin port %d is published", envoyAdminPort)
	}
}

// argAfter returns the argument that follows flag in args.
func argAfter(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
