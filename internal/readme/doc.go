// Package readme holds TestReadmeExamples, which runs the examples of the
// repository's README.md the way a new user meets them: in a fresh copy of
// the repository (the files git tracks, nothing from beside it), with the
// binary installed by the README's own `go install` line, each command as
// written. A README example that points outside the repository, needs a
// header it does not show, or prints an address that does not answer
// fails here instead of in a newcomer's first hour.
//
// The package has no code of its own; its test reads ../../README.md.
package readme
