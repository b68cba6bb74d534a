//go:build !unix

package node

// nofile is a conservative descriptor budget where RLIMIT_NOFILE does not
// exist.
func nofile() int { return 8192 }
