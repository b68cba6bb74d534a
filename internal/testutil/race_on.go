//go:build race

package testutil

// RaceEnabled reports a build with the race detector, whose instrumentation
// allocates and slows code about tenfold: tests that count allocations or
// measure throughput skip those checks under it.
const RaceEnabled = true
