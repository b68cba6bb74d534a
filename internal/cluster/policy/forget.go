package policy

// Forgetter is implemented by the policies that keep a table per URL (lard,
// lardr, tbccrd, weblins). Forget drops url from it, as when a node answers
// 404: after a publish changed or removed a file (internal/cluster/publish), the
// nodes dropped it from their caches, so the front's placement and cache
// mirror for it are stale; the next request places it afresh.
type Forgetter interface {
	Forget(url string)
}

// Forget drops url from LARD's target map.
func (p *LARD) Forget(url string) {
	if id, ok := p.idx.lookup(url); ok {
		p.idx.remove(id)
	}
}

// Forget drops url from LARD/R's server sets.
func (p *LARDR) Forget(url string) {
	if id, ok := p.idx.lookup(url); ok {
		p.idx.remove(id)
	}
}

// Forget drops url from TB-CCRD's URL table and cache mirrors.
func (p *TBCCRD) Forget(url string) { p.t.forget(url) }

// Forget drops url from Weblins' document table and cache mirrors.
func (p *Weblins) Forget(url string) { p.t.forget(url) }

// Forget passes url on to the current policy if it keeps URL tables.
func (s *Switch) Forget(url string) {
	if f, ok := s.cur.(Forgetter); ok {
		f.Forget(url)
	}
}
