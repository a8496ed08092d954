package session

import (
	"strconv"
	"testing"
)

// TestRoomsItoa: the lengths written in the session's room keep their
// text however many follow, past the room too.
func TestRoomsItoa(t *testing.T) {
	var r actionRooms
	var got []string
	for n := range 40 {
		got = append(got, r.itoa(n*997))
	}
	for n, s := range got {
		if want := strconv.Itoa(n * 997); s != want {
			t.Fatalf("itoa(%d) reads %q, want %q", n*997, s, want)
		}
	}
}
