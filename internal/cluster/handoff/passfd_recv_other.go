//go:build !linux

package handoff

// recvFlags: elsewhere recvmsg has no close-on-exec flag (nor does
// net.UnixConn.ReadMsgUnix use one).
const recvFlags = 0
