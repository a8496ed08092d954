package deploy

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// shutdownMargin is what the grace period must leave beyond the longest
// shutdown step, for the process to exit after its graceful stop.
const shutdownMargin = 5 * time.Second

// TestShutdownTiming checks every tfsbridge pod's rollout behaviour: the
// grace period covers preStop, --drain-delay and --shutdown-timeout; a
// shared ext_proc service keeps tfsbridge's own readiness; a sidecar pod
// follows its model server, has tfsbridge drain the Envoy beside it, and
// keeps tfsbridge and the model server up until that Envoy has exited.
func TestShutdownTiming(t *testing.T) {
	for _, dir := range kustomizations {
		r := kustomizeBuild(t, dir)
		for d, args := range tfsbridgeDeployments(t, r) {
			t.Run(dir+"/"+d.Name, func(t *testing.T) {
				checkShutdownTiming(t, d, args)
			})
		}
	}
}

func checkShutdownTiming(t *testing.T, d *appsv1.Deployment, args tfsbridgeArgs) {
	spec := d.Spec.Template.Spec
	drain := flagDuration(t, args, "drain-delay", defaultDrainDelay)
	shutdown := flagDuration(t, args, "shutdown-timeout", defaultShutdownTimeout)
	grace := defaultGracePeriod
	if spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	}
	var tfsbridge corev1.Container
	for _, c := range spec.Containers {
		if c.Name == "tfsbridge" {
			tfsbridge = c
		}
	}
	if need := preStopSleep(t, tfsbridge) + drain + shutdown + shutdownMargin; grace < need {
		t.Errorf("terminationGracePeriodSeconds %v < preStop + --drain-delay %v + --shutdown-timeout %v + %v: the kubelet kills tfsbridge mid-drain",
			grace, drain, shutdown, shutdownMargin)
	}
	if drain <= 0 {
		t.Error("--drain-delay=0: tfsbridge would refuse streams while Envoys still send them")
	}

	envoy, sidecar := containerNamed(spec.Containers, "envoy")
	readiness := args.flags["readiness"]
	if !sidecar {
		if readiness != "" && readiness != "tfsbridge" {
			t.Errorf("shared ext_proc service with --readiness=%s: one down model server would take every pod out of rotation", readiness)
		}
		return
	}
	if readiness != "backend" {
		t.Errorf("sidecar pod with --readiness=%q: want backend, so the pod leaves rotation with its model server", readiness)
	}
	if want := fmt.Sprintf("http://127.0.0.1:%d", envoyAdminPort); args.flags["drain-envoy"] != want {
		t.Errorf("--drain-envoy=%q, want %s (the sidecar Envoy's admin)", args.flags["drain-envoy"], want)
	}
	envoyStop := preStopSleep(t, envoy)
	if envoyStop <= 0 {
		t.Fatal("envoy has no preStop sleep: it exits on SIGTERM while the endpoint removal is still propagating")
	}
	if drainTime := envoyArgDuration(t, envoy, "--drain-time-s"); drainTime <= 0 || drainTime > envoyStop {
		t.Errorf("envoy --drain-time-s %v must be positive and within its preStop sleep %v", drainTime, envoyStop)
	}
	if i := slices.Index(envoy.Args, "--drain-strategy"); i < 0 || i+1 >= len(envoy.Args) || envoy.Args[i+1] != "immediate" {
		t.Error("envoy --drain-strategy immediate: every connection closes after its current request once the drain starts")
	}
	if drain <= envoyStop {
		t.Errorf("--drain-delay %v must outlast Envoy's preStop sleep %v: tfsbridge must serve Envoy until it exits", drain, envoyStop)
	}
	for _, c := range spec.Containers {
		if c.Name == "envoy" || c.Name == "tfsbridge" {
			continue
		}
		if s := preStopSleep(t, c); s < envoyStop {
			t.Errorf("%s: preStop sleep %v shorter than Envoy's %v: Envoy would forward to a stopped server", c.Name, s, envoyStop)
		}
		if s := preStopSleep(t, c); grace < s+shutdownMargin {
			t.Errorf("%s: preStop sleep %v leaves no time within the grace period %v", c.Name, s, grace)
		}
	}
}

// flagDuration returns a tfsbridge duration flag, or def when absent.
func flagDuration(t *testing.T, a tfsbridgeArgs, name string, def time.Duration) time.Duration {
	t.Helper()
	v, ok := a.flags[name]
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Errorf("--%s=%s: %v", name, v, err)
	}
	return d
}

// preStopSleep returns a container's preStop sleep. A preStop exec is
// refused: the images here are distroless, with nothing to exec.
func preStopSleep(t *testing.T, c corev1.Container) time.Duration {
	t.Helper()
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return 0
	}
	h := c.Lifecycle.PreStop
	if h.Exec != nil {
		t.Errorf("%s: preStop exec %v; the images have no shell, use sleep", c.Name, h.Exec.Command)
	}
	if h.Sleep == nil {
		return 0
	}
	return time.Duration(h.Sleep.Seconds) * time.Second
}

// envoyArgDuration returns the seconds following flag in Envoy's args.
func envoyArgDuration(t *testing.T, c corev1.Container, flag string) time.Duration {
	t.Helper()
	i := slices.Index(c.Args, flag)
	if i < 0 || i+1 >= len(c.Args) {
		return 0
	}
	n, err := strconv.Atoi(c.Args[i+1])
	if err != nil {
		t.Errorf("envoy %s %q: %v", flag, c.Args[i+1], err)
	}
	return time.Duration(n) * time.Second
}

func containerNamed(cs []corev1.Container, name string) (corev1.Container, bool) {
	for _, c := range cs {
		if c.Name == name {
			return c, true
		}
	}
	return corev1.Container{}, false
}
