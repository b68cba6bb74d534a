package policy

import "sync/atomic"

// Switch is a Policy whose implementation can be replaced while the front
// runs (SIGHUP reload): the front's cluster calls Pick, Done and CloseConn
// under its lock, and Set must be called under that same lock too
// (control.Cluster.WithPolicy), so a request is placed wholly by the old
// policy or wholly by the new one. The new policy starts with empty tables
// and learns the nodes' load from the shared view, as after a restart but
// without dropping a connection. Name and Traits are safe without the lock.
type Switch struct {
	cur    Policy
	name   atomic.Pointer[string]
	traits atomic.Pointer[Traits]
}

// NewSwitch wraps p.
func NewSwitch(p Policy) *Switch {
	s := &Switch{}
	s.Set(p)
	return s
}

// Set replaces the policy; call it under the cluster's lock (WithPolicy).
func (s *Switch) Set(p Policy) {
	s.cur = p
	n := p.Name()
	s.name.Store(&n)
	t := TraitsOf(p)
	s.traits.Store(&t)
}

// Current returns the wrapped policy (under the cluster's lock).
func (s *Switch) Current() Policy { return s.cur }

// Name returns the current policy's name.
func (s *Switch) Name() string { return *s.name.Load() }

// Traits implements Describer: the current policy's traits. Without it a
// wrapped content-blind policy looked content-aware (TraitsOf's safe
// default), and the passfd front asked the nodes to hand every connection
// back after each request.
func (s *Switch) Traits() Traits { return *s.traits.Load() }

// Pick asks the current policy.
func (s *Switch) Pick(c *Cluster, r *Request) Decision { return s.cur.Pick(c, r) }

// Done tells the current policy. A request placed by a replaced policy is
// reported to its successor, whose tables simply may not know it.
func (s *Switch) Done(c *Cluster, node int, r *Request) { s.cur.Done(c, node, r) }

// CloseConn passes the notice on when the current policy keeps
// per-connection state.
func (s *Switch) CloseConn(conn uint64) {
	if cc, ok := s.cur.(ConnCloser); ok {
		cc.CloseConn(conn)
	}
}

// Tables returns the current policy's tables, nil when it keeps none.
func (s *Switch) Tables(limit int) any {
	if t, ok := s.cur.(Tabler); ok {
		return t.Tables(limit)
	}
	return nil
}
