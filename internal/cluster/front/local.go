package front

import (
	"net"
	"time"

	"shoal/internal/base/httpwire"
	"shoal/internal/cluster/control"
)

// LocalRequest is a request the front hands to a node in its own process
// (Local): the client's connection, the parsed head (its slices alias the
// front's buffer and are valid only during the call), the time the head
// was read, whether the connection closes after the answer (the client
// asked, or the front is shutting down) and the write timeout the answer
// must keep renewing while it sends.
type LocalRequest struct {
	Conn         net.Conn
	Req          *httpwire.Request
	Now          time.Time
	Close        bool
	WriteTimeout time.Duration
}

// LocalAnswer is what the node did with a LocalRequest. Handled false
// means it wrote nothing and left the request to the socket path (the
// front relays it). Otherwise Status is the status sent, Size the
// object's size (-1 unknown, for the policy's Done), Body the body bytes
// and Sent all bytes written to the client, Close whether the connection
// must close, and Err a write error.
type LocalAnswer struct {
	Handled bool
	Status  int
	Size    int64
	Body    int64
	Sent    int64
	Close   bool
	Err     error
}

// Local returns the data path for nodes in the front's own process (`shoal
// pop`, `shoal up` with in-process nodes): serve hands the request to the
// node the policy chose, which answers on the client's connection itself
// when it can do so at once (a cache hit), as seed 003 §3.3's gateway
// hands a request to the device holding the content and the device
// answers the client. No loopback connection to the node is written to
// and read from, and the request is not parsed twice. A request with a
// body, and every request the node declines (Handled false: a miss, a
// revalidation, anything that may wait on an upstream), is relayed over
// the node's socket as Relay does, so long or streamed answers keep the
// relay's deadlines and node slots. serve returning Handled false must
// have written nothing.
func Local(serve func(b *control.Backend, r LocalRequest) LocalAnswer) DataPath {
	return localPath{serve: serve}
}

// localRelayed counts, among the local path's requests (counted as
// "local"), those the node declined and the front relayed.
const localRelayed = "local-relayed"

type localPath struct {
	serve func(b *control.Backend, r LocalRequest) LocalAnswer
}

func (localPath) Name() string { return "local" }

func (p localPath) Serve(x *Exchange) Result {
	cc := x.cc
	s := cc.s
	req := x.Req
	var a LocalAnswer
	if !req.HasBody() && req.HasHost {
		cc.wdl.setWrite(cc.c, cc.now, s.cfg.WriteTimeout)
		a = p.serve(x.Backend, LocalRequest{Conn: cc.c, Req: req, Now: time.Unix(0, cc.now),
			Close: req.Close || s.closing.Load(), WriteTimeout: s.cfg.WriteTimeout})
	}
	if !a.Handled {
		s.pathCounter(localRelayed).Add(1)
		return cc.relay(x)
	}
	if a.Status >= 100 && a.Status < 600 {
		s.ctr.status[a.Status/100].Add(1)
	}
	s.ctr.bytesOut.Add(uint64(a.Sent))
	cc.sent += a.Sent
	cc.log.headAt, cc.log.body = cc.now, a.Body
	if a.Status == 200 && a.Size >= 0 {
		x.Policy.Size = a.Size
	}
	return Result{Status: a.Status, Close: a.Close || a.Err != nil, Err: a.Err}
}
