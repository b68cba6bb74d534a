package front

import (
	"net"
	"time"
)

// answerReason says why the front answered a request itself instead of
// passing a node's answer on. Every such answer counts as a response of
// its status class (Stats.Status, Sent4xx, Sent5xx), by reason in
// Stats.Answers, in the access log (JSON "reason") and, through the
// Observer, in the per-request metrics — the per-address limit once
// refused a quarter of a load test with none of these showing it.
type answerReason uint8

const (
	answerNone           answerReason = iota
	answerPerIP                       // 503: the client's address holds MaxConnsPerIP connections
	answerConnLimit                   // 503: MaxClientConns connections, none idle to close
	answerQueueFull                   // 503: the node's queue was full
	answerQueueTimeout                // 503: waited QueueTimeout for a node slot
	answerNoNode                      // 503: no usable node (all down, or none)
	answerNodeTimeout                 // 504: the node did not answer in time
	answerNodeError                   // 502: the node failed, or broke its answer
	answerHeaderTimeout               // 408: the request head did not arrive in time
	answerBadRequest                  // 400, 431: the request itself is malformed or too large
	answerNotImplemented              // 501, 505: a method or protocol the front does not relay
	answerInternalPath                // 404: the nodes' /.shoal/ space is not public
	numAnswers
)

// answerNames are the reasons as /stats, /metrics and the JSON access log
// spell them.
var answerNames = [numAnswers]string{"", "per_ip", "conn_limit", "queue_full", "queue_timeout", "no_node",
	"node_timeout", "node_error", "header_timeout", "bad_request", "not_implemented", "internal_path"}

// AnswerStats counts the answers the front gave itself, by reason (see
// answerReason; Sent4xx and Sent5xx are their totals by class).
type AnswerStats struct {
	PerIP, ConnLimit, QueueFull, QueueTimeout, NoNode uint64 // 503
	NodeTimeout                                       uint64 // 504
	NodeError                                         uint64 // 502
	HeaderTimeout, BadRequest                         uint64 // 408; 400, 431
	NotImplemented                                    uint64 // 501, 505
	InternalPath                                      uint64 // 404
}

// ReasonCount is one reason's count, with the status class it answers
// with (4 or 5).
type ReasonCount struct {
	Reason string
	Class  int
	N      uint64
}

// ByReason lists the counts in a fixed order, for /stats, /metrics and
// the operational log.
func (a AnswerStats) ByReason() []ReasonCount {
	return []ReasonCount{
		{"per_ip", 5, a.PerIP}, {"conn_limit", 5, a.ConnLimit}, {"queue_full", 5, a.QueueFull},
		{"queue_timeout", 5, a.QueueTimeout}, {"no_node", 5, a.NoNode}, {"node_timeout", 5, a.NodeTimeout},
		{"node_error", 5, a.NodeError}, {"not_implemented", 5, a.NotImplemented},
		{"header_timeout", 4, a.HeaderTimeout}, {"bad_request", 4, a.BadRequest}, {"internal_path", 4, a.InternalPath},
	}
}

func (c *counters) answerStats() AnswerStats {
	f := func(r answerReason) uint64 { return c.answers[r].Load() }
	return AnswerStats{PerIP: f(answerPerIP), ConnLimit: f(answerConnLimit), QueueFull: f(answerQueueFull),
		QueueTimeout: f(answerQueueTimeout), NoNode: f(answerNoNode), NodeTimeout: f(answerNodeTimeout),
		NodeError: f(answerNodeError), HeaderTimeout: f(answerHeaderTimeout), BadRequest: f(answerBadRequest),
		NotImplemented: f(answerNotImplemented), InternalPath: f(answerInternalPath)}
}

// countAnswer counts one answer the front made itself: its class, its
// reason.
func (c *counters) countAnswer(status int, why answerReason) {
	if status >= 500 {
		c.sent5xx.Add(1)
	} else if status >= 400 {
		c.sent4xx.Add(1)
	}
	c.status[status/100].Add(1)
	c.answers[why].Add(1)
}

// requestReason is the reason for an answer to a request head the front
// could not parse, by the status the parser asked for.
func requestReason(status int) answerReason {
	if status >= 500 {
		return answerNotImplemented
	}
	return answerBadRequest
}

// answerBare reports an answer given before any request head was parsed
// (a connection refused at accept, a head that timed out or did not
// parse) to the access log and the Observer, which only see requests
// otherwise: the log line has "-" for the request, as nginx writes it.
// ip is the client's address; body the bytes of the answer's body.
func (s *Server) answerBare(ip string, start time.Time, status int, body int64, why answerReason) {
	if l := s.cfg.AccessLog; l != nil {
		l.writeBare(ip, start, status, body, why)
	}
	if o := s.cfg.Observer; o != nil {
		o.Observe(Observation{Node: -1, Status: status, Elapsed: time.Since(start)})
	}
}

// peerIP is c's peer address as the access log writes it.
func peerIP(c net.Conn) string {
	if a := remoteAddr(c); a.IsValid() {
		return a.String()
	}
	return ""
}
