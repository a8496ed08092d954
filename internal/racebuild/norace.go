//go:build !race

// Package racebuild tells tests whether the binary was built with -race,
// whose runs are several times slower and whose sync.Pool drops some of
// what it is given on purpose: soak tests run fewer requests, and
// allocation counts are not checked.
package racebuild

// Enabled reports a -race build.
const Enabled = false
