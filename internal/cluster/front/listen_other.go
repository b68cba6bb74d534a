//go:build !linux

package front

// deferAccept does nothing where TCP_DEFER_ACCEPT does not exist.
func deferAccept(int) {}

// undeferAccept does nothing where TCP_DEFER_ACCEPT does not exist.
func undeferAccept(int) {}
