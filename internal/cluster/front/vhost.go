package front

import (
	"strings"

	"shoal/internal/base/content"
	"shoal/internal/base/httpwire"
	"shoal/internal/base/vhost"
)

// vhostState is a connection's scratch for content keys with virtual
// hosts: buffers reused across requests, so keying costs no allocation
// while a client keeps asking for the same object.
type vhostState struct {
	site    string // site of the current request ("" without VHosts)
	hostBuf []byte
	keyBuf  []byte
}

// setKey sets cc.url to the content key of req (contentKey, or cacheKey
// with Config.CacheKeys).
func (cc *clientConn) setKey(req *httpwire.Request) {
	if cc.s.cfg.CacheKeys {
		cc.url = cacheKey(req, cc.url, &cc.vh)
		return
	}
	cc.url = contentKey(cc.s.cfg.VHosts, req, cc.url, &cc.vh)
}

// cacheKey returns the cache-mode content key of req: the lower-cased host
// (the absolute-form target's authority, else Host) followed by the
// request-target's path and query. prev is returned as is (no allocation)
// when the key did not change.
func cacheKey(req *httpwire.Request, prev string, vh *vhostState) string {
	host := req.Host
	if a := vhost.Authority(req.Target); a != nil {
		host = a
	}
	k := vh.keyBuf[:0]
	for _, c := range host {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		k = append(k, c)
	}
	t := req.Target
	if len(t) > 0 && t[0] != '/' {
		p := req.Path() // the path of an absolute-form target
		if i := indexByte(t, '?'); i >= 0 {
			k = append(append(k, p...), t[i:]...)
		} else {
			k = append(k, p...)
		}
	} else {
		k = append(k, t...)
	}
	if i := indexByte(k, '#'); i >= 0 {
		k = k[:i]
	}
	vh.keyBuf = k
	if string(k) != prev {
		return string(k)
	}
	return prev
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// contentKey returns the content key of req: the object its path names
// (content.ObjectKey: no query, escapes decoded, the spellings of one file
// folded, a directory's index file), or with vm its site + that. The nodes
// cache a file under that URL and the simulator keys its policies by the
// same function, so a locality policy sends every spelling of one file to
// one node's cache. A path no node would serve (a bad escape, ".." above
// the root) keys as received; the node refuses it. prev is the caller's
// last key, returned as is (no allocation) when the key did not change; vh
// holds the reused buffers and receives the site.
func contentKey(vm *vhost.Map, req *httpwire.Request, prev string, vh *vhostState) string {
	p := bstr(req.Path()) // a view of the request: copied below before it is kept
	if k, ok := content.ObjectKey(p); ok {
		p = k
	}
	if vm == nil {
		if p != prev {
			return strings.Clone(p)
		}
		return prev
	}
	host := req.Host
	if a := vhost.Authority(req.Target); a != nil {
		// RFC 9112 §3.2.2: the target's authority wins over Host (Path
		// already dropped it from the path).
		host = a
	}
	vh.site, vh.hostBuf = vm.Site(vh.hostBuf, host)
	vh.keyBuf = append(vhost.AppendKey(vh.keyBuf[:0], vh.site, nil), p...)
	if string(vh.keyBuf) != prev {
		return string(vh.keyBuf)
	}
	return prev
}

// internalKey reports whether a content key names the nodes' internal
// space (internalURL); with virtual hosts the path after the site is
// checked.
func internalKey(key string, vhosts bool) bool {
	if vhosts {
		if i := strings.IndexByte(key, '/'); i >= 0 {
			key = key[i:]
		}
	}
	return internalURL(key)
}
