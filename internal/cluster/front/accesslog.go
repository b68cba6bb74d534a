package front

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"shoal/internal/base/httpwire"
	"shoal/internal/base/trace"
	"shoal/internal/cluster/control"
)

// AccessLogFormat is the layout of the front's access log lines.
type AccessLogFormat uint8

const (
	// LogCommon is the NCSA Common Log Format, the default: what `shoal
	// trace` and `shoal sim` read back, so a day of traffic can be replayed
	// against another policy.
	LogCommon AccessLogFormat = iota
	// LogCombined is CLF followed by the quoted Referer and User-Agent
	// (Apache's and nginx's "combined"); the trace reader ignores the tail.
	LogCombined
	// LogJSON is one JSON object per line with the fields of CLF plus what
	// only the front knows: the node, the policy, the data path, the retry,
	// the time to the node's response head and the total time.
	LogJSON
)

// AccessLogFormats lists the names ParseAccessLogFormat accepts.
var AccessLogFormats = []string{"common", "combined", "json"}

// ParseAccessLogFormat maps "common" (or "clf", or ""), "combined" and
// "json" to a format; anything else is an error naming the valid ones.
func ParseAccessLogFormat(s string) (AccessLogFormat, error) {
	switch s {
	case "", "common", "clf":
		return LogCommon, nil
	case "combined":
		return LogCombined, nil
	case "json":
		return LogJSON, nil
	}
	return 0, fmt.Errorf("access log format %q is unknown: want one of %s", s, strings.Join(AccessLogFormats, ", "))
}

// String returns the format's name as ParseAccessLogFormat takes it.
func (f AccessLogFormat) String() string {
	if int(f) < len(AccessLogFormats) {
		return AccessLogFormats[f]
	}
	return "format(" + strconv.Itoa(int(f)) + ")"
}

// accessLogFlush is how often buffered lines reach the file: often enough
// for `tail -f`, rarely enough to cost nothing per request.
const accessLogFlush = time.Second

// AccessLog is the front's request log. Each client connection formats its
// line in its own buffer and copies it into one shared bufio.Writer under a
// mutex; a timer flushes that every second, as does Close. Formatting
// allocates nothing, so the relay stays at 0 allocations per request with
// the log on.
type AccessLog struct {
	format AccessLogFormat
	path   string // "" for a writer given by the caller, "-" for stdout

	mu     sync.Mutex
	w      *bufio.Writer
	closer io.Closer // the file, nil for a caller's writer or stdout
	err    error     // first write error, reported by Close

	bare []byte // writeBare's line buffer, under mu

	lines atomic.Uint64
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// NewAccessLog logs to w in format f. Close flushes it but does not close w.
func NewAccessLog(w io.Writer, f AccessLogFormat) *AccessLog {
	l := &AccessLog{format: f, w: bufio.NewWriterSize(w, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go l.flusher()
	return l
}

// OpenAccessLog appends to the file at path ("-" is standard output),
// creating it with mode 0640 (client addresses are personal data).
func OpenAccessLog(path string, f AccessLogFormat) (*AccessLog, error) {
	if path == "-" {
		l := NewAccessLog(os.Stdout, f)
		l.path = path
		return l, nil
	}
	file, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("access log: %w", err)
	}
	l := NewAccessLog(file, f)
	l.path, l.closer = path, file
	return l, nil
}

// Format is the log's line format.
func (l *AccessLog) Format() AccessLogFormat { return l.format }

// Lines counts the lines written so far.
func (l *AccessLog) Lines() uint64 { return l.lines.Load() }

// Path is the file the log was opened at ("-" for stdout, "" for a
// caller's writer).
func (l *AccessLog) Path() string { return l.path }

// Reopen closes and reopens the log file at its path, so that logrotate's
// rename-then-signal works (SIGUSR1, or SIGHUP, in `shoal front` and
// `shoal up`). A log over a caller's
// writer or stdout only flushes.
func (l *AccessLog) Reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.w.Flush()
	if l.closer == nil {
		return err
	}
	file, oerr := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if oerr != nil {
		return fmt.Errorf("access log: reopen: %w", oerr)
	}
	l.closer.Close()
	l.closer = file
	l.w.Reset(file)
	return err
}

// Flush writes the buffered lines out.
func (l *AccessLog) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.w.Flush(); err != nil {
		if l.err == nil {
			l.err = err
		}
		return fmt.Errorf("access log: %w", err)
	}
	return nil
}

// Close stops the flush timer, flushes, and closes the file it opened. It
// returns the first write error seen, if any.
func (l *AccessLog) Close() error {
	l.once.Do(func() { close(l.stop) })
	<-l.done
	l.Flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closer != nil {
		if err := l.closer.Close(); err != nil && l.err == nil {
			l.err = err
		}
		l.closer = nil
	}
	if l.err != nil {
		return fmt.Errorf("access log: %w", l.err)
	}
	return nil
}

func (l *AccessLog) flusher() {
	defer close(l.done)
	tick(accessLogFlush, l.stop, func() { l.Flush() })
}

func (l *AccessLog) write(b []byte) {
	l.mu.Lock()
	if _, err := l.w.Write(b); err != nil && l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
	l.lines.Add(1)
}

// logReq is what a connection keeps of the current request for its log
// line: the head's slices alias the read buffer, which a body may overwrite
// before the line is written, so the fields are copied into buf (reused).
type logReq struct {
	buf                   []byte
	method, target, proto int // end offsets in buf
	referer, agent        int
	start                 time.Time
	headAt                int64 // UnixNano when the node's response head arrived (relay)
	body                  int64 // response body bytes sent to the client
	line                  []byte
	captured              bool
	// reason is why the front answered itself (writeError), answerNone
	// when the answer is the node's.
	reason answerReason
}

// captureLog copies what the log line needs from the parsed head.
func (cc *clientConn) captureLog(req *httpwire.Request, start time.Time) {
	proto := "HTTP/1.1"
	if req.Minor == 0 {
		proto = "HTTP/1.0"
	}
	cc.log.capture(req, start, proto, cc.s.cfg.AccessLog.format)
	cc.clientIP()
}

// capture copies what the log line needs from the parsed head; proto is
// the protocol the client spoke ("HTTP/1.1", "HTTP/2.0", "HTTP/3.0").
func (lr *logReq) capture(req *httpwire.Request, start time.Time, proto string, format AccessLogFormat) {
	b := append(lr.buf[:0], req.Method...)
	lr.method = len(b)
	b = append(b, req.Target...)
	lr.target = len(b)
	b = append(b, proto...)
	lr.proto = len(b)
	if format != LogCommon {
		var ref, ua []byte
		for _, h := range req.Headers {
			switch {
			case len(h.Name) == 7 && httpwire.EqualFold(h.Name, "referer"):
				ref = h.Value
			case len(h.Name) == 10 && httpwire.EqualFold(h.Name, "user-agent"):
				ua = h.Value
			}
		}
		b = append(b, ref...)
		lr.referer = len(b)
		b = append(b, ua...)
		lr.agent = len(b)
	} else {
		lr.referer, lr.agent = len(b), len(b)
	}
	lr.buf = b
	lr.start, lr.headAt, lr.body, lr.captured, lr.reason = start, 0, -1, true, answerNone
}

// writeLog formats and writes the line of the request just finished.
func (cc *clientConn) writeLog(res Result, b *control.Backend, path string, retried bool, end time.Time) {
	cc.log.write(cc.s.cfg.AccessLog, cc.ip, cc.s.cl.Policy().Name(), res, b, path, retried, end)
}

// write formats and writes the line of the request just finished, from
// client address ip, under policy.
func (lr *logReq) write(l *AccessLog, ip, policy string, res Result, b *control.Backend, path string, retried bool, end time.Time) {
	if !lr.captured {
		return
	}
	lr.captured = false
	if res.Status == 0 && l.format != LogJSON {
		// Handed off: the node answered and logs it; CLF has no line for
		// a status the front never saw.
		return
	}
	f := lr.buf
	method, target, proto := f[:lr.method], f[lr.method:lr.target], f[lr.target:lr.proto]
	referer, agent := f[lr.proto:lr.referer], f[lr.referer:lr.agent]
	out := lr.line[:0]
	if l.format == LogJSON {
		out = append(out, `{"time":"`...)
		out = lr.start.UTC().AppendFormat(out, time.RFC3339Nano)
		out = append(out, `","client":`...)
		out = appendJSONString(out, ip)
		out = append(out, `,"method":`...)
		out = appendJSONString(out, bstr(method))
		out = append(out, `,"url":`...)
		out = appendJSONString(out, bstr(target))
		out = append(out, `,"proto":"`...)
		out = append(out, proto...)
		out = append(out, `","status":`...)
		out = strconv.AppendInt(out, int64(res.Status), 10)
		out = append(out, `,"bytes":`...)
		out = strconv.AppendInt(out, lr.body, 10)
		out = append(out, `,"referer":`...)
		out = appendJSONString(out, bstr(referer))
		out = append(out, `,"user_agent":`...)
		out = appendJSONString(out, bstr(agent))
		out = append(out, `,"node":`...)
		if b != nil {
			out = appendJSONString(out, b.URL)
			out = append(out, `,"node_index":`...)
			out = strconv.AppendInt(out, int64(b.Index), 10)
		} else {
			out = append(out, `null,"node_index":-1`...)
		}
		out = append(out, `,"policy":`...)
		out = appendJSONString(out, policy)
		out = append(out, `,"path":`...)
		out = appendJSONString(out, path)
		out = append(out, `,"handoff":`...)
		out = strconv.AppendBool(out, res.Detached)
		out = append(out, `,"retried":`...)
		out = strconv.AppendBool(out, retried)
		out = append(out, `,"upstream_ms":`...)
		if lr.headAt > 0 {
			out = strconv.AppendFloat(out, float64(lr.headAt-lr.start.UnixNano())/1e6, 'f', 3, 64)
		} else {
			out = append(out, "null"...)
		}
		out = append(out, `,"duration_ms":`...)
		out = strconv.AppendFloat(out, float64(end.Sub(lr.start))/1e6, 'f', 3, 64)
		out = appendReason(out, lr.reason)
		out = append(out, "}\n"...)
	} else {
		out = trace.AppendCLF(out, trace.Record{Host: ip, Time: lr.start, Method: bstr(method),
			URL: bstr(target), Proto: bstr(proto), Status: res.Status, Bytes: lr.body})
		if l.format == LogCombined {
			out = out[:len(out)-1] // the '\n'
			out = append(out, ` "`...)
			out = appendCLFQuoted(out, referer)
			out = append(out, `" "`...)
			out = appendCLFQuoted(out, agent)
			out = append(out, "\"\n"...)
		}
	}
	lr.line = out
	l.write(out)
}

// appendReason appends the JSON line's last field: why the front answered
// itself (answers.go), null for a node's answer.
func appendReason(out []byte, why answerReason) []byte {
	out = append(out, `,"reason":`...)
	if why == answerNone {
		return append(out, "null"...)
	}
	out = append(out, '"')
	out = append(out, answerNames[why]...)
	return append(out, '"')
}

// writeBare writes the line of an answer given before any request head was
// parsed (answers.go): "-" for the request in CLF, as nginx writes it; in
// JSON, null method, url and proto, and the reason. Rare (refusals,
// timeouts, garbage), so it formats under the log's lock in a buffer of
// its own.
func (l *AccessLog) writeBare(ip string, start time.Time, status int, body int64, why answerReason) {
	l.mu.Lock()
	out := l.bare[:0]
	if l.format == LogJSON {
		out = append(out, `{"time":"`...)
		out = start.UTC().AppendFormat(out, time.RFC3339Nano)
		out = append(out, `","client":`...)
		out = appendJSONString(out, ip)
		out = append(out, `,"method":null,"url":null,"proto":null,"status":`...)
		out = strconv.AppendInt(out, int64(status), 10)
		out = append(out, `,"bytes":`...)
		out = strconv.AppendInt(out, body, 10)
		out = append(out, `,"referer":"","user_agent":"","node":null,"node_index":-1,"policy":null,"path":"",`...)
		out = append(out, `"handoff":false,"retried":false,"upstream_ms":null,"duration_ms":`...)
		out = strconv.AppendFloat(out, float64(time.Since(start))/1e6, 'f', 3, 64)
		out = appendReason(out, why)
		out = append(out, "}\n"...)
	} else {
		out = appendBareCLF(out, ip, start, status, body)
		if l.format == LogCombined {
			out = append(out[:len(out)-1], " \"-\" \"-\"\n"...)
		}
	}
	l.bare = out
	if _, err := l.w.Write(out); err != nil && l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
	l.lines.Add(1)
}

// appendBareCLF appends a CLF line whose request is "-".
func appendBareCLF(out []byte, ip string, start time.Time, status int, body int64) []byte {
	return trace.AppendCLF(out, trace.Record{Host: ip, Time: start, Status: status, Bytes: body})
}

// appendCLFQuoted appends v for a double-quoted log field, empty as "-"
// and '"', '\\' and control bytes escaped as nginx does (\xHH), so a
// header cannot forge a field or a line.
func appendCLFQuoted(dst, v []byte) []byte {
	if len(v) == 0 {
		return append(dst, '-')
	}
	const hex = "0123456789ABCDEF"
	for _, c := range v {
		if c == '"' || c == '\\' || c < 0x20 || c >= 0x7f {
			dst = append(dst, '\\', 'x', hex[c>>4], hex[c&15])
			continue
		}
		dst = append(dst, c)
	}
	return dst
}

// appendJSONString appends s as a JSON string (RFC 8259 §7), replacing
// invalid UTF-8 with U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}

// bstr views b as a string without copying, for calls that do not keep it.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
