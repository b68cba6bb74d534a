package handoff

import "golang.org/x/sys/unix"

// recvFlags makes received descriptors close-on-exec as they arrive, as
// net.UnixConn.ReadMsgUnix does on Linux.
const recvFlags = unix.MSG_CMSG_CLOEXEC
