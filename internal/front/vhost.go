package front

import (
	"shoal/internal/httpwire"
	"shoal/internal/vhost"
)

// vhostState is a connection's scratch for content keys with virtual
// hosts: buffers reused across requests, so keying costs no allocation
// while a client keeps asking for the same object.
type vhostState struct {
	site    string // site of the current request ("" without VHosts)
	hostBuf []byte
	keyBuf  []byte
}

// setKey sets cc.url to the content key of req (contentKey).
func (cc *clientConn) setKey(req *httpwire.Request) {
	cc.url = contentKey(cc.s.cfg.VHosts, req, cc.url, &cc.vh)
}

// contentKey returns the content key of req: its path, or with vm its
// site + path. prev is the caller's last key, returned as is (no
// allocation) when the key did not change; vh holds the reused buffers and
// receives the site.
func contentKey(vm *vhost.Map, req *httpwire.Request, prev string, vh *vhostState) string {
	p := req.Path()
	if vm == nil {
		if string(p) != prev {
			return string(p)
		}
		return prev
	}
	host := req.Host
	if a := vhost.Authority(req.Target); a != nil {
		// RFC 9112 §3.2.2: the target's authority wins over Host.
		host = a
		if i := indexAfterAuthority(p); i >= 0 {
			p = p[i:]
		} else {
			p = slash
		}
	}
	vh.site, vh.hostBuf = vm.Site(vh.hostBuf, host)
	vh.keyBuf = vhost.AppendKey(vh.keyBuf[:0], vh.site, p)
	if string(vh.keyBuf) != prev {
		return string(vh.keyBuf)
	}
	return prev
}

var slash = []byte("/")

// indexAfterAuthority returns where the path of an absolute-form target
// starts ("http://h/p" -> 8), or -1 when it has none.
func indexAfterAuthority(t []byte) int {
	for i := 0; i+2 < len(t); i++ {
		if t[i] == ':' && t[i+1] == '/' && t[i+2] == '/' {
			for j := i + 3; j < len(t); j++ {
				if t[j] == '/' {
					return j
				}
			}
			return -1
		}
	}
	return -1
}
