package httpwire

// SeqHeader carries a front's token for one relayed request; a node echoes
// it in the answer, which tells the front the answer is that request's (the
// front's nodeConn.answered). Defined here, once, for both sides.
const SeqHeader = "Shoal-Seq"

// LastSeq returns the value of the last SeqHeader field of hs, nil when
// there is none.
func LastSeq(hs []Header) []byte {
	var v []byte
	for _, h := range hs {
		if len(h.Name) == len(SeqHeader) && EqualFold(h.Name, SeqHeader) {
			v = h.Value
		}
	}
	return v
}

// ParseSeq reads a token as fronts write it: 1–16 lowercase hex digits;
// ok is false for anything else, which is neither trusted nor echoed.
func ParseSeq(v []byte) (tok uint64, ok bool) {
	if len(v) == 0 || len(v) > 16 {
		return 0, false
	}
	for _, c := range v {
		switch {
		case c >= '0' && c <= '9':
			tok = tok<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			tok = tok<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return tok, true
}
