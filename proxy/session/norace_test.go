//go:build !race

package session

// raceEnabled reports a -race build (see race_test.go).
const raceEnabled = false
