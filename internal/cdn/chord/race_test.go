//go:build race

package chord

// The race detector slows the large simulations tenfold; they run without it.
func init() { raceEnabled = true }
