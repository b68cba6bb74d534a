//go:build race

package node

// raceEnabled: the race detector's instrumentation allocates, so
// allocation counts are not checked under it.
const raceEnabled = true
