package trace

import (
	"strconv"
	"time"
)

// AppendCLF appends r to dst as one Common Log Format line ending in '\n' and
// returns the extended slice. ident and user are written as "-", an empty Host
// as "-", Bytes < 0 as "-", and the time in r.Time's own zone; a VHost comes
// first, as nginx's "$host $remote_addr ..." format. In the request,
// '"', '\\', control bytes and bytes from 0x7f up are written as \xHH, as
// nginx writes $request: a client cannot end the quoted field early, forge
// fields or lines, or make its line unparsable (and so absent from a
// replay); ParseLine reads the escapes back. It does not allocate when dst
// has room, so servers can use it for their access logs.
func AppendCLF(dst []byte, r Record) []byte {
	if r.VHost != "" {
		// nginx's "$host $remote_addr - ..." layout, which the parser reads back.
		dst = append(dst, r.VHost...)
		dst = append(dst, ' ')
	}
	if r.Host == "" {
		dst = append(dst, '-')
	} else {
		dst = append(dst, r.Host...)
	}
	dst = append(dst, " - - ["...)
	dst = appendCLFTime(dst, r.Time)
	dst = append(dst, "] \""...)
	dst = appendEscaped(dst, r.Method)
	dst = append(dst, ' ')
	dst = appendEscaped(dst, r.URL)
	if r.Proto != "" {
		dst = append(dst, ' ')
		dst = appendEscaped(dst, r.Proto)
	}
	dst = append(dst, "\" "...)
	dst = strconv.AppendInt(dst, int64(r.Status), 10)
	dst = append(dst, ' ')
	if r.Bytes < 0 {
		dst = append(dst, '-')
	} else {
		dst = strconv.AppendInt(dst, r.Bytes, 10)
	}
	return append(dst, '\n')
}

func append2(dst []byte, v int) []byte {
	return append(dst, byte('0'+v/10%10), byte('0'+v%10))
}

// appendCLFTime writes "dd/Mon/yyyy:hh:mm:ss +zzzz".
func appendCLFTime(dst []byte, t time.Time) []byte {
	y, mon, d := t.Date()
	h, mi, s := t.Clock()
	_, off := t.Zone()
	dst = append2(dst, d)
	dst = append(dst, '/')
	dst = append(dst, monthNames[mon-1]...)
	dst = append(dst, '/')
	dst = append2(dst, y/100)
	dst = append2(dst, y%100)
	dst = append(dst, ':')
	dst = append2(dst, h)
	dst = append(dst, ':')
	dst = append2(dst, mi)
	dst = append(dst, ':')
	dst = append2(dst, s)
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	off /= 60
	dst = append(dst, ' ', sign)
	dst = append2(dst, off/60)
	return append2(dst, off%60)
}

// appendEscaped appends s with '"', '\\', control bytes and bytes from
// 0x7f up as \xHH (upper-case hex).
func appendEscaped(dst []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\\' || c < 0x20 || c >= 0x7f {
			dst = append(dst, '\\', 'x', hex[c>>4], hex[c&15])
			continue
		}
		dst = append(dst, c)
	}
	return dst
}
