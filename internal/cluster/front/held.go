package front

// Load on the handoff paths. A connection passed to a node
// stays counted against that node (control.Hold) from just before the send
// until the node says it ended: it hands the connection back (FDReturn), it
// reports its end (FDEnded, asked for with handoff.FDFlagEnded on
// connections the node keeps; repair's FIN-HANDOFF), or its handoff socket
// or control channel breaks. The hold is taken before the send because the
// node may answer at once; a failed send releases it.

// releaseSocket releases the connections held by the nodes whose handoff
// socket is path (the socket broke: the kernel closed what they held).
func releaseSocket(s *Server, path string) {
	for _, b := range s.cl.Backends() {
		if st := b.LastStatus(); st != nil && st.HandoffSocket == path {
			s.cl.ReleaseNode(b.Index)
		}
	}
}
