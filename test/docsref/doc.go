// Package docsref checks that the documentation names only things that
// exist: every repository path, tfsbridge flag and tfsbridge_* metric that
// README.md, docs/*.md and the READMEs under deploy/ and test/ mention must
// be in the repository, in the binary's flag set, and registered by
// proxy/observe. A doc that outlives a rename fails the build instead of
// misleading a reader.
//
// The package has no non-test code: this file only documents it.
package docsref
