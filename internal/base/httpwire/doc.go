// Package httpwire is shoal's HTTP/1.1 wire layer: strict, allocation-free
// parsers of request heads (parse.go), response heads (parse_response.go, the
// front reading a node's answer) and Range headers (ranges.go) over a byte
// slice, and append-style helpers that build response heads, HTTP dates,
// byte ranges and entity-tag matches.
//
// Why hand-written instead of net/http: net/http allocates a Request, a Header
// map and several strings per request and owns the connection's bufio.Reader.
// The node (SPEC §1) must serve a cached 1 KB file faster than nginx, which
// leaves no room for per-request garbage, and the front-end (SPEC §4) must see
// the exact bytes it has read so that it can relay them verbatim or hand the
// socket and the unread bytes to a node (seeds 000/002). Parsing in place over
// the connection's own buffer gives both: every field of a Request is a
// sub-slice of the input, valid until the caller reuses the buffer, and a
// Request is reused from one request to the next, so steady-state parsing does
// not allocate.
//
// The parser follows RFC 9112 and is strict where leniency enables request
// smuggling or cache poisoning: bare LF and bare CR, obsolete line folding,
// whitespace before the colon, NUL and other control characters, invalid
// token characters, duplicate or malformed Content-Length, Transfer-Encoding
// together with Content-Length, Transfer-Encoding on HTTP/1.0, a missing
// or repeated Host on HTTP/1.1, a Connection header naming Content-Length,
// Transfer-Encoding or Host (RFC 9110 §7.6.1), and a request-target whose
// form does not fit the method (RFC 9112 §3.2) are all refused with an
// *Error whose Status is 400 (or 431 for an oversized head, 501 for an
// unknown transfer coding, 505 for an unsupported version). An incomplete
// head yields ErrNeedMore.
//
// The front-end and the nodes parse with this one parser, the front on the
// client's head and a node on the head the front rewrote from it, so they
// agree on where every message ends. ForwardHeadroom and ForwardFields are
// what the rewrite may add; a node's limits exceed the front's by them.
package httpwire
