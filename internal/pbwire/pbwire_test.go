package pbwire

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestWalk(t *testing.T) {
	msg := protowire.AppendTag(nil, 1, protowire.VarintType)
	msg = protowire.AppendVarint(msg, 300)
	msg = protowire.AppendTag(msg, 2, protowire.Fixed32Type)
	msg = protowire.AppendFixed32(msg, 7)
	msg = protowire.AppendTag(msg, 3, protowire.Fixed64Type)
	msg = protowire.AppendFixed64(msg, 1<<40)
	msg = protowire.AppendTag(msg, 4, protowire.StartGroupType) // skipped whole
	msg = protowire.AppendTag(msg, 1, protowire.VarintType)
	msg = protowire.AppendVarint(msg, 1)
	msg = protowire.AppendTag(msg, 4, protowire.EndGroupType)
	msg = protowire.AppendTag(msg, 5, protowire.BytesType)
	msg = protowire.AppendString(msg, "ab")

	type seen struct {
		num protowire.Number
		typ protowire.Type
		v   string
		u   uint64
	}
	var got []seen
	if err := Walk(msg, func(f *Field) error {
		got = append(got, seen{f.Num, f.Typ, string(f.V), f.U})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []seen{
		{1, protowire.VarintType, "", 300},
		{2, protowire.Fixed32Type, "", 7},
		{3, protowire.Fixed64Type, "", 1 << 40},
		{5, protowire.BytesType, "ab", 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}

	stop := errors.New("stop")
	calls := 0
	if err := Walk(msg, func(*Field) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("callback error: got %v after %d calls, want stop after 1", err, calls)
	}
}

func TestWalkMalformed(t *testing.T) {
	tag := protowire.AppendTag(nil, 1, protowire.BytesType)
	for _, tc := range []struct {
		name string
		msg  []byte
	}{
		{"truncated tag", []byte{0x80}},
		{"truncated varint", []byte{0x08, 0x80}},
		{"truncated fixed32", []byte{0x15, 1, 2}},
		{"length past the end", append(tag, 5, 'a')},
		{"field number zero", []byte{0x00, 0x00}},
		{"unterminated group", []byte{0x0b}},
		{"number beyond 2^29-1", protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Walk(tc.msg, func(*Field) error { return nil }); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
}

func TestScalars(t *testing.T) {
	packed := func(w Width, vs ...uint64) *Field {
		var b []byte
		for _, v := range vs {
			switch w {
			case Fixed32:
				b = protowire.AppendFixed32(b, uint32(v))
			case Fixed64:
				b = protowire.AppendFixed64(b, v)
			default:
				b = protowire.AppendVarint(b, v)
			}
		}
		return &Field{Num: 1, Typ: protowire.BytesType, V: b}
	}
	f32 := uint64(math.Float32bits(1.5))
	for _, tc := range []struct {
		name string
		f    *Field
		w    Width
		want []uint64
		err  bool
	}{
		{"one varint", &Field{Typ: protowire.VarintType, U: 3}, Varint, []uint64{3}, false},
		{"one fixed32", &Field{Typ: protowire.Fixed32Type, U: f32}, Fixed32, []uint64{f32}, false},
		{"packed varints", packed(Varint, 1, 300, math.MaxUint64), Varint, []uint64{1, 300, math.MaxUint64}, false},
		{"packed fixed32", packed(Fixed32, f32, 2), Fixed32, []uint64{f32, 2}, false},
		{"packed fixed64", packed(Fixed64, 1<<40, 9), Fixed64, []uint64{1 << 40, 9}, false},
		{"empty packed run", packed(Varint), Varint, nil, false},
		{"truncated varint", &Field{Typ: protowire.BytesType, V: []byte{0x01, 0x80}}, Varint, []uint64{1}, true},
		{"truncated fixed32", &Field{Typ: protowire.BytesType, V: []byte{1, 2, 3}}, Fixed32, nil, true},
		{"truncated fixed64", &Field{Typ: protowire.BytesType, V: []byte{1, 2, 3, 4}}, Fixed64, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []uint64
			err := Scalars(tc.f, tc.w, func(u uint64) { got = append(got, u) })
			if tc.err != errors.Is(err, ErrMalformed) || (!tc.err && err != nil) {
				t.Fatalf("err = %v, want malformed %v", err, tc.err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAppendScalars(t *testing.T) {
	run := func(n int) *Field {
		var b []byte
		for i := range n {
			b = protowire.AppendVarint(b, uint64(i))
		}
		return &Field{Typ: protowire.BytesType, V: b}
	}
	upTo := func(n int) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = uint64(i)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		dst  []uint64
		f    *Field
		max  int
		want []uint64
		err  error
	}{
		{"no bound", nil, run(100), -1, upTo(100), nil},
		{"exactly max", nil, run(5), 5, upTo(5), nil},
		{"past max", nil, run(6), 5, upTo(5), ErrTooMany},
		{"max counts what dst held", []uint64{9}, run(5), 5, append([]uint64{9}, upTo(4)...), ErrTooMany},
		{"one value at max", []uint64{9}, &Field{Typ: protowire.VarintType, U: 1}, 1, []uint64{9}, ErrTooMany},
		{"one value", nil, &Field{Typ: protowire.Fixed64Type, U: 7}, 1, []uint64{7}, nil},
		{"malformed before max", nil, &Field{Typ: protowire.BytesType, V: []byte{1, 0x80}}, 5, []uint64{1}, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendScalars(tc.dst, tc.f, Varint, tc.max)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestScalarsChunks crosses Scalars' stack chunks: every value arrives once,
// in order, and a malformed tail after a full chunk still fails.
func TestScalarsChunks(t *testing.T) {
	var b []byte
	for i := range 100 {
		b = protowire.AppendFixed64(b, uint64(i))
	}
	for _, tc := range []struct {
		name string
		v    []byte
		n    int
		err  error
	}{
		{"100 values", b, 100, nil},
		{"truncated 65th", b[:64*8+3], 64, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []uint64
			err := Scalars(&Field{Typ: protowire.BytesType, V: tc.v}, Fixed64, func(u uint64) { got = append(got, u) })
			if !errors.Is(err, tc.err) || len(got) != tc.n {
				t.Fatalf("got %d values, err %v; want %d, %v", len(got), err, tc.n, tc.err)
			}
			for i, u := range got {
				if u != uint64(i) {
					t.Fatalf("value %d = %d", i, u)
				}
			}
		})
	}
}

func TestCheckScalars(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    *Field
		w    Width
		ok   bool
	}{
		{"single value", &Field{Typ: protowire.VarintType, U: 1}, Fixed32, true},
		{"fixed32 run", &Field{Typ: protowire.BytesType, V: make([]byte, 8)}, Fixed32, true},
		{"fixed32 partial", &Field{Typ: protowire.BytesType, V: make([]byte, 6)}, Fixed32, false},
		{"fixed64 partial", &Field{Typ: protowire.BytesType, V: make([]byte, 12)}, Fixed64, false},
		{"varints", &Field{Typ: protowire.BytesType, V: []byte{1, 0x80, 1}}, Varint, true},
		{"varint truncated", &Field{Typ: protowire.BytesType, V: []byte{1, 0x80}}, Varint, false},
		{"varint overflow", &Field{Typ: protowire.BytesType, V: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}}, Varint, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckScalars(tc.f, tc.w)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			// The check agrees with reading the values.
			if rerr := Scalars(tc.f, tc.w, func(uint64) {}); (rerr == nil) != tc.ok {
				t.Fatalf("Scalars err = %v, want ok %v", rerr, tc.ok)
			}
		})
	}
}

func TestStr(t *testing.T) {
	if s, err := Str([]byte("héllo")); err != nil || s != "héllo" {
		t.Fatalf("Str(valid) = %q, %v", s, err)
	}
	if _, err := Str([]byte{0xff}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Str(invalid UTF-8) = %v, want ErrMalformed", err)
	}
}
