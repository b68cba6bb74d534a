//go:build !race

package testutil

// RaceEnabled is false without the race detector (race_on.go).
const RaceEnabled = false
