package tfgrpc

import (
	"errors"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/internal/grpcproto"
)

func TestDecodeModelSpec(t *testing.T) {
	// Occurrences of model_spec fields as protobuf reads them: the oneof
	// keeps the last member set, an Int64Value occurrence merges into
	// the previous one, version 0 is a version.
	tests := []struct {
		name string
		wire string
		want ModelSpec
	}{
		{"name, version, signature", "0a 01 6d 12 02 08 03 1a 01 73", ModelSpec{Name: "m", Version: 3, HasVersion: true, SignatureName: "s"}},
		{"version 0 (an empty Int64Value)", "0a 01 6d 12 00", ModelSpec{Name: "m", HasVersion: true}},
		{"label after version wins", "12 02 08 03 22 01 62", ModelSpec{VersionLabel: "b"}},
		{"version after label wins", "22 01 62 12 02 08 07", ModelSpec{Version: 7, HasVersion: true}},
		{"versions merge", "12 02 08 03 12 00", ModelSpec{Version: 3, HasVersion: true}},
		{"negative version", "12 0b 08 ff ff ff ff ff ff ff ff ff 01", ModelSpec{Version: -1, HasVersion: true}},
	}
	for _, tt := range tests {
		got, err := DecodeModelSpec(unhex(t, tt.wire))
		if err != nil || got != tt.want {
			t.Errorf("%s: %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
		// The protobuf runtime reads the same spec from our encoding.
		m, err := grpcproto.Unmarshal("tensorflow.serving.ModelSpec", AppendModelSpec(nil, tt.want))
		if err != nil || grpcproto.Get(m, "name").String() != tt.want.Name || grpcproto.Get(m, "version_label").String() != tt.want.VersionLabel ||
			m.Has(grpcproto.Field(m, "version")) != tt.want.HasVersion || grpcproto.Get(grpcproto.Get(m, "version").Message(), "value").Int() != tt.want.Version {
			t.Errorf("%s: AppendModelSpec reads back as %v, %v", tt.name, m, err)
		}
	}
	if _, err := DecodeModelSpec(unhex(t, "0a 01 ff")); !errors.Is(err, ErrMalformed) {
		t.Errorf("invalid UTF-8 name: %v, want ErrMalformed", err)
	}
}
