package pop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"shoal/internal/cdn/chord"
)

// onCDN hands a content frame from PoP from to the content manager. A PoP
// that runs no content tier (no --origin) still answers what another PoP
// waits for: a directory query (no holders, and no gateway, so that it is
// not taken as a shield), a purge (nothing is held here: confirmed) and a
// purge sync (none). Unanswered, each query cost the asking PoP's miss
// the whole query timeout, with nothing in either log to say why.
func (p *PoP) onCDN(from uint64, body []byte) {
	if p.cm != nil {
		p.cm.m.onCDNFrame(from, body)
		return
	}
	var in msg
	if err := json.Unmarshal(body, &in); err != nil {
		p.log.Warn("bad content frame", "from", fmt.Sprintf("%016x", from), "err", err)
		return
	}
	switch in.Op {
	case opQuery:
		p.send(from, "", msg{Op: opHolders, Req: in.Req})
	case opPurge:
		p.send(from, "", msg{Op: opPurged, Req: in.Req, From: p.cfg.Name})
	case opSync:
		p.send(from, "", msg{Op: opPurges, Req: in.Req})
	}
}

// lookup finds the owner of key with Chord and waits for the answer.
func (p *PoP) lookup(ctx context.Context, key chord.ID) (chord.Peer, error) {
	ch := make(chan chord.Result, 1)
	p.mu.Lock()
	if p.ch == nil {
		p.mu.Unlock()
		return chord.Peer{}, errors.New("pop: not in the Chord ring yet")
	}
	id, out := p.ch.Lookup(time.Now(), key)
	p.lookups[id] = ch
	p.deliverLocked()
	p.mu.Unlock()
	p.sendChord(out)
	p.poke()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	defer func() {
		p.mu.Lock()
		delete(p.lookups, id)
		p.mu.Unlock()
	}()
	select {
	case r := <-ch:
		if r.Err != nil {
			return chord.Peer{}, r.Err
		}
		return r.Owner, nil
	case <-ctx.Done():
		return chord.Peer{}, fmt.Errorf("chord lookup: %w", ctx.Err())
	}
}

// deliverLocked hands finished lookups to their waiters; p.mu is held.
func (p *PoP) deliverLocked() {
	if p.ch == nil {
		return
	}
	for _, r := range p.ch.TakeResults() {
		if ch := p.lookups[r.Lookup]; ch != nil {
			ch <- r
		}
	}
}

func (p *PoP) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}
