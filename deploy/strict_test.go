package deploy

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	appsv1 "k8s.io/api/apps/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	// Extensions named by "@type" in the configs under deploy/: protojson and
	// anypb resolve type URLs through the global registry, which these
	// imports fill. A config naming an extension missing here fails to parse.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// decodeK8sStrict decodes one YAML (or JSON) document into a Kubernetes-style
// Go type the way the API server's strict field validation does: duplicate
// keys, unknown fields and case-mismatched field names are errors.
func decodeK8sStrict(doc []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return fmt.Errorf("yaml: %w", err)
	}
	strictErrs, err := sigsjson.UnmarshalStrict(j, v)
	if err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return errors.Join(strictErrs...)
}

// decodeProtoStrict decodes one YAML (or JSON) document into an Envoy or Istio
// proto message: protojson rejects unknown fields and "@type"s it cannot
// resolve, then validateDeep applies the protoc-gen-validate rules.
func decodeProtoStrict(doc []byte, m proto.Message) error {
	if err := unmarshalProtoStrict(doc, m); err != nil {
		return err
	}
	return validateDeep(m)
}

// unmarshalProtoStrict is decodeProtoStrict without the validation, for
// partial messages (Istio MERGE patches) validated once merged.
func unmarshalProtoStrict(doc []byte, m proto.Message) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return fmt.Errorf("yaml: %w", err)
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(j, m); err != nil {
		return fmt.Errorf("protojson: %w", err)
	}
	return nil
}

// validator is implemented by every message protoc-gen-validate generated.
type validator interface{ ValidateAll() error }

// validateDeep runs ValidateAll on m and on every message packed in a
// google.protobuf.Any below it. Validation alone never looks inside an Any
// (it checks the type URL at most), yet almost all of an Envoy config — HCM,
// filters, protocol options, access logs — lives in typed_config Anys.
func validateDeep(m proto.Message) error {
	if v, ok := m.(validator); ok {
		if err := v.ValidateAll(); err != nil {
			return fmt.Errorf("%s: %w", m.ProtoReflect().Descriptor().FullName(), err)
		}
	}
	return forEachAny(m.ProtoReflect(), func(a *anypb.Any) error {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("%s: %w", a.GetTypeUrl(), err)
		}
		return validateDeep(inner)
	})
}

// forEachAny calls fn for every Any reachable from m through set fields,
// without descending into the Anys themselves.
func forEachAny(m protoreflect.Message, fn func(*anypb.Any) error) error {
	if a, ok := m.Interface().(*anypb.Any); ok {
		return fn(a)
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() == nil {
				return true
			}
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				err = forEachAny(mv.Message(), fn)
				return err == nil
			})
		case fd.IsList():
			if fd.Message() == nil {
				return true
			}
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = forEachAny(l.Get(i).Message(), fn)
			}
		case fd.Message() != nil:
			err = forEachAny(v.Message(), fn)
		}
		return err == nil
	})
	return err
}

// readFile reads a file of the repository, relative to deploy/.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStrictDecodersReject shows that the decoders the other tests rely on
// do reject what Envoy or the API server would: each case damages a real file
// in one place and must fail with the expected reason.
func TestStrictDecodersReject(t *testing.T) {
	envoyYAML := string(readFile(t, "envoy/envoy.yaml"))
	deploymentYAML := string(readFile(t, "kubernetes/deployment.yaml"))

	decodeEnvoy := func(doc string) error { _, err := parseBootstrap([]byte(doc)); return err }
	decodeDeployment := func(doc string) error { return decodeK8sStrict([]byte(doc), &appsv1.Deployment{}) }

	tests := []struct {
		name     string
		doc      string
		old, new string
		decode   func(string) error
		wantErr  string
	}{
		{
			name: "envoy: misspelled field inside the ext_proc Any",
			doc:  envoyYAML, old: "allow_mode_override: true", new: "allow_mode_overide: true",
			decode: decodeEnvoy, wantErr: "unknown field",
		},
		{
			name: "envoy: out-of-range value inside the ext_proc Any",
			doc:  envoyYAML, old: "message_timeout: 30s", new: "message_timeout: 7200s",
			decode: decodeEnvoy, wantErr: "MessageTimeout",
		},
		{
			name: "envoy: unregistered extension type",
			doc:  envoyYAML, old: "router.v3.Router", new: "router.v3.Routr",
			decode: decodeEnvoy, wantErr: "Routr",
		},
		{
			name: "envoy: invalid value outside any Any",
			doc:  envoyYAML, old: "connect_timeout: 1s", new: "connect_timeout: 0s",
			decode: decodeEnvoy, wantErr: "ConnectTimeout",
		},
		{
			name: "envoy: duplicate key",
			doc:  envoyYAML, old: "stat_prefix: tfs_rest\n", new: "stat_prefix: tfs_rest\n          stat_prefix: other\n",
			decode: decodeEnvoy, wantErr: "already set",
		},
		{
			name: "envoy: bad enum name",
			doc:  envoyYAML, old: "request_body_mode: BUFFERED", new: "request_body_mode: BUFFER",
			decode: decodeEnvoy, wantErr: "BUFFER",
		},
		{
			name: "kubernetes: unknown field",
			doc:  deploymentYAML, old: "containerPort: 9090", new: "containerPorts: 9090",
			decode: decodeDeployment, wantErr: "unknown field",
		},
		{
			name: "kubernetes: field name in the wrong case",
			doc:  deploymentYAML, old: "readOnlyRootFilesystem: true", new: "readonlyRootFilesystem: true",
			decode: decodeDeployment, wantErr: "readonlyRootFilesystem",
		},
		{
			name: "kubernetes: duplicate key",
			doc:  deploymentYAML, old: "  replicas: 1\n", new: "  replicas: 1\n  replicas: 2\n",
			decode: decodeDeployment, wantErr: "already set",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.decode(tt.doc); err != nil {
				t.Fatalf("the undamaged file must decode: %v", err)
			}
			if !strings.Contains(tt.doc, tt.old) {
				t.Fatalf("the file no longer contains %q: update this case", tt.old)
			}
			damaged := strings.Replace(tt.doc, tt.old, tt.new, 1)
			err := tt.decode(damaged)
			if err == nil {
				t.Fatalf("decoded without error after %q -> %q", tt.old, tt.new)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not mention %q", err, tt.wantErr)
			}
		})
	}
}
