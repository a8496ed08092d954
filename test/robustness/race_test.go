//go:build race

package robustness

// raceEnabled reports a -race build, whose requests are several times
// slower: the soak tests run fewer of them.
const raceEnabled = true
