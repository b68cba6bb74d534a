//go:build !unix

package front

// nofile is a conservative descriptor budget where RLIMIT_NOFILE does not
// exist.
func nofile() int { return 8192 }

// DescriptorLimit returns the descriptor budget the connection limits'
// defaults derive from.
func DescriptorLimit() int { return nofile() }
