package deploy

import (
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// envoy-full-duplex.yaml is envoy.yaml with the settings a body mode decides
// changed and nothing else: the checked sidecar bootstrap and its
// full-duplex variant cannot drift apart (TestEnvoyBootstrapsDecidedSettings
// checks each in its mode).
func TestEnvoyFullDuplexVariant(t *testing.T) {
	var boots []*bootstrapv3.Bootstrap
	for _, f := range []string{referenceBootstraps[buffered], referenceBootstraps[fullDuplex]} {
		b, err := parseBootstrap(readFile(t, f))
		if err != nil {
			t.Fatal(err)
		}
		withoutBodyModeSettings(t, b)
		boots = append(boots, b)
	}
	if diff := protoDiff(boots[0], boots[1]); diff != "" {
		t.Errorf("%s differs from %s beyond the body mode's settings:\n%s", referenceBootstraps[fullDuplex], referenceBootstraps[buffered], diff)
	}
}

// withoutBodyModeSettings clears, in place, what the body mode decides in a
// bootstrap: the buffer limits of listeners and clusters, the HTTP
// connection managers' stream idle timeout, and the ext_proc filter's
// processing mode, mode override and message timeouts.
func withoutBodyModeSettings(t *testing.T, b *bootstrapv3.Bootstrap) {
	t.Helper()
	for _, c := range b.GetStaticResources().GetClusters() {
		c.PerConnectionBufferLimitBytes = nil
	}
	for _, l := range b.GetStaticResources().GetListeners() {
		l.PerConnectionBufferLimitBytes = nil
		hcm := listenerHCM(t, l)
		hcm.StreamIdleTimeout = nil
		if f := httpFilter(hcm, extProcFilterName); f != nil {
			ep := &extprocv3.ExternalProcessor{}
			if err := f.GetTypedConfig().UnmarshalTo(ep); err != nil {
				t.Fatal(err)
			}
			ep.ProcessingMode, ep.AllowModeOverride, ep.MessageTimeout, ep.MaxMessageTimeout = nil, false, nil, nil
			f.ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: packDeterministic(t, ep)}
		}
		l.GetFilterChains()[0].GetFilters()[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: packDeterministic(t, hcm)}
	}
}

// packDeterministic packs m into an Any whose bytes depend only on m, so
// that equal messages packed this way compare equal.
func packDeterministic(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		t.Fatal(err)
	}
	return a
}
