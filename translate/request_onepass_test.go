package translate

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
)

// TestOnePassBodies: predict.Request (the body as one chunk) and
// RequestStream (the body in small chunks) send the very bytes
// tfrequest.Parse's tensors encode to, for every server kind, batch
// adaptation included.
func TestOnePassBodies(t *testing.T) {
	batched := &tensor.Signature{Batched: true, Inputs: []tensor.Spec{
		{Name: "img", DataType: tensor.FP32, Shape: []int64{-1, 2, 2}},
		{Name: "tag", DataType: tensor.Bytes, Shape: []int64{-1}},
	}}
	single := &tensor.Signature{Inputs: []tensor.Spec{{Name: "x", DataType: tensor.FP64, Shape: []int64{3}}}}
	cases := []struct {
		sig  *tensor.Signature
		body string
	}{
		{batched, `{"instances": [{"img": [[0.1, 0.2], [0.3, 4e-7]], "tag": "a"}, {"tag": {"b64": "aGk="}, "img": [[1, 2], [3, 4]]}]}`},
		{batched, `{"signature_name": "", "inputs": {"tag": ["x", "y"], "img": [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]}}`},
		{single, `{"instances": [[0.30000000000000004, -1e-300, 12345678901234567890]]}`}, // unbatched: one instance, declared rank 1
		{single, `{"inputs": [1, 2, 3]}`},
	}
	for _, kind := range []oip.ServerKind{oip.Triton, oip.KServe, oip.MLServer} {
		opt := RequestOptions{Kind: kind, ID: "r1"}
		for _, c := range cases {
			resolve := func(string) (*tensor.Signature, error) { return c.sig, nil }
			exact, err := tfrequest.Parse([]byte(c.body), resolve, tensor.Limits{})
			if err != nil {
				t.Fatalf("%s: %v", c.body, err)
			}
			want, wantEx, err := encodeRequest(exact, opt)
			exact.Release()
			if err != nil {
				t.Fatal(err)
			}
			got, gotEx, err := predict.Request([]byte(c.body), resolve, opt)
			if err != nil || !bytes.Equal(got.Body, want.Body) || got.HeaderLength != want.HeaderLength || gotEx != wantEx {
				t.Errorf("%v %s: predict.Request differs (%v)\n got %q\nwant %q", kind, c.body, err, got.Body, want.Body)
			}
			s := predict.NewRequestStream(resolve, opt)
			for i := 0; i < len(c.body); i += 3 {
				if err := s.Write([]byte(c.body[i:min(i+3, len(c.body))])); err != nil {
					t.Fatalf("%s: Write: %v", c.body, err)
				}
			}
			got, gotEx, err = s.Close()
			if err != nil || !bytes.Equal(bytes.Join(got.Chunks(), nil), want.Body) || got.Len() != len(want.Body) || gotEx != wantEx {
				t.Errorf("%v %s: RequestStream differs (%v)", kind, c.body, err)
			}
			got.Release()
		}
	}
	// A body a stream cannot decide (tfrequest.ErrUndecided) is answered
	// from the kept text while it is at most ReplayBytes long, exactly as
	// predict.Request answers it; beyond that, with the 400.
	late := []byte(`{"instances": [[1, 2]], "signature_name": "other"}`)
	other := &tensor.Signature{Inputs: []tensor.Spec{{Name: "y", DataType: tensor.Int32}}}
	resolve := func(name string) (*tensor.Signature, error) {
		if name == "other" {
			return other, nil
		}
		return single, nil
	}
	want, wantEx, err := predict.Request(late, resolve, RequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, replay := range []int64{0, int64(len(late)), 1 << 30} {
		s := predict.NewRequestStream(resolve, RequestOptions{ReplayBytes: replay})
		for i := range late {
			if err := s.Write(late[i : i+1]); err != nil {
				t.Fatalf("ReplayBytes %d: Write: %v", replay, err)
			}
		}
		got, gotEx, err := s.Close()
		if err != nil || !bytes.Equal(bytes.Join(got.Chunks(), nil), want.Body) || gotEx != wantEx {
			t.Errorf("ReplayBytes %d: Close = %q, %v; want %q", replay, bytes.Join(got.Chunks(), nil), err, want.Body)
		}
		got.Release()
	}
	s := predict.NewRequestStream(resolve, RequestOptions{ReplayBytes: int64(len(late)) - 1})
	if err := s.Write(late); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Close(); !errors.Is(err, tfrequest.ErrUndecided) || apierr.As(err).HTTPStatus() != 400 {
		t.Errorf("beyond ReplayBytes: Close = %v, want a 400 wrapping ErrUndecided", err)
	}
}
