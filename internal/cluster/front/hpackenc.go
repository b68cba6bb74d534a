package front

import (
	"strconv"

	"shoal/internal/base/httpwire"
)

// A stateless HPACK encoder for response heads (RFC 7541): the status as
// one of the static table's indexed fields when it is there, every other
// field a literal without indexing (§6.2.2), set-cookie never indexed
// (§6.2.3, so a proxy downstream does not keep it), names taken from the
// static table when they are in it, strings without Huffman coding. It
// writes no dynamic-table entries, so it needs no state and no lock
// (h2write.go says why); x/net's hpack.Encoder would index fields and
// needs strings, which would cost two allocations per field.

// hpackStatus maps the statuses in the static table to their index.
var hpackStatus = map[int]byte{200: 8, 204: 9, 206: 10, 304: 11, 400: 12, 404: 13, 500: 14}

// hpackNames maps the static table's field names (RFC 7541 Appendix A,
// indexes 15 to 61) to their index.
var hpackNames = func() map[string]uint8 {
	names := []string{"accept-charset", "accept-encoding", "accept-language", "accept-ranges", "accept",
		"access-control-allow-origin", "age", "allow", "authorization", "cache-control", "content-disposition",
		"content-encoding", "content-language", "content-length", "content-location", "content-range",
		"content-type", "cookie", "date", "etag", "expect", "expires", "from", "host", "if-match",
		"if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified", "link",
		"location", "max-forwards", "proxy-authenticate", "proxy-authorization", "range", "referer", "refresh",
		"retry-after", "server", "set-cookie", "strict-transport-security", "transfer-encoding", "user-agent",
		"vary", "via", "www-authenticate"}
	m := make(map[string]uint8, len(names))
	for i, n := range names {
		m[n] = uint8(15 + i)
	}
	return m
}()

// hpackSetCookie is set-cookie's index.
const hpackSetCookie = 55

// appendResponseBlock appends the header block of a response with status
// and fields (names in any case; they go out in lower case, as HTTP/2
// requires).
func appendResponseBlock(b []byte, status int, fields []httpwire.Header) []byte {
	if i, ok := hpackStatus[status]; ok {
		b = append(b, 0x80|i) // indexed field
	} else {
		b = append(b, 0x08) // literal without indexing, name :status (8)
		var d [8]byte
		b = hpackString(b, strconv.AppendInt(d[:0], int64(status), 10))
	}
	for _, f := range fields {
		b = appendField(b, f.Name, f.Value)
	}
	return b
}

// appendField appends one field as a literal without indexing (never
// indexed for set-cookie), its name lowered.
func appendField(b, name, value []byte) []byte {
	start := len(b)
	b = append(b, name...)
	for i := start; i < len(b); i++ {
		if c := b[i]; c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	idx := hpackNames[string(b[start:])]
	if idx != 0 {
		b = b[:start]
		prefix := byte(0x00)
		if idx == hpackSetCookie {
			prefix = 0x10
		}
		b = hpackInt(b, 4, prefix, uint64(idx))
		return hpackString(b, value)
	}
	// A new name: shift the lowered name right to make room for the
	// representation's first byte and the name's length.
	lowered := len(b) - start
	var pre [12]byte
	p := append(pre[:0], 0x00)
	p = hpackInt(p, 7, 0, uint64(lowered))
	b = append(b, p...)
	copy(b[start+len(p):], b[start:start+lowered])
	copy(b[start:], p)
	return hpackString(b, value)
}

// hpackInt appends v with an n-bit prefix after the flag bits in first
// (RFC 7541 §5.1).
func hpackInt(b []byte, n uint, first byte, v uint64) []byte {
	max := uint64(1)<<n - 1
	if v < max {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(max))
	v -= max
	for v >= 128 {
		b = append(b, byte(v&0x7f)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// hpackString appends s as a string literal without Huffman coding (RFC
// 7541 §5.2).
func hpackString(b, s []byte) []byte {
	b = hpackInt(b, 7, 0, uint64(len(s)))
	return append(b, s...)
}
