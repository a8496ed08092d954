//go:build !race

package robustness

// raceEnabled reports a -race build (see race_test.go).
const raceEnabled = false
