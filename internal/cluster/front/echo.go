package front

import (
	"math/rand/v2"
	"strconv"

	"shoal/internal/base/httpwire"
)

// seqHeader carries a random token with each request the front relays; a
// node echoes it in its answer, which proves the answer is that request's
// and spares the peek at the pooled connection before the request goes
// (nodeConn.fit). Hop-by-hop: dropped from what clients send and from what
// they get (dropHeader).
const seqHeader = httpwire.SeqHeader

// newToken is a request's token: random, so that nothing a client or a
// node sends ahead can carry the token of a request not yet made, and never
// 0 (no token).
func newToken() uint64 {
	if t := rand.Uint64(); t != 0 {
		return t
	}
	return 1
}

// appendSeq appends the seqHeader field for token tok.
func appendSeq(out []byte, tok uint64) []byte {
	out = append(out, seqHeader+": "...)
	out = strconv.AppendUint(out, tok, 16)
	return append(out, "\r\n"...)
}

// isSeqHeader reports whether name is seqHeader.
func isSeqHeader(name []byte) bool {
	return len(name) == len(seqHeader) && httpwire.EqualFold(name, seqHeader)
}

// echoOf returns the token the last seqHeader of hs carries; ok false when
// there is none or it is not a token appendSeq writes.
func echoOf(hs []httpwire.Header) (tok uint64, ok bool) {
	return httpwire.ParseSeq(httpwire.LastSeq(hs))
}
