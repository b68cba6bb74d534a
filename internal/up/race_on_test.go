//go:build race

package up

// raceEnabled: the race detector slows the in-process front tenfold, so
// the load-distribution tests (which measure where a policy sends load,
// and so depend on the front keeping up) skip under it.
const raceEnabled = true
