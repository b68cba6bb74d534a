//go:build race

package testutil

// RaceEnabled reports a build with the race detector, whose instrumentation
// allocates, slows code about tenfold and multiplies a process's memory:
// tests that count allocations or measure throughput or memory skip those
// checks under it.
const RaceEnabled = true
