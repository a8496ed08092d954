//go:build race

package racebuild

// Enabled reports a -race build.
const Enabled = true
