//go:build !race

package main

// raceEnabled: the race detector multiplies a process's memory, so the
// test that measures it skips under it.
const raceEnabled = false
