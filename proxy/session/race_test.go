//go:build race

package session

// raceEnabled reports a -race build, whose sync.Pool drops some of what
// it is given: allocation counts are not checked.
const raceEnabled = true
