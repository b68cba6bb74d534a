// Package peer makes the nodes' memories one cache (seed 001, Weblins; SPEC
// §1 "fetches from peers' caches"): a node asked for an object that the
// policy says another node holds (policy.Decision.Fetch) gets it from that
// peer's memory — the peer reads its own disk first if it must, and keeps
// the copy — instead of reading its own disk; and each node sends its peers
// a Bloom-filter digest of its memory cache (Summary Cache), which cluster
// GDSF reads to evict the objects that have other copies first.
//
// Transport: a node reaches a peer on the peer's own HTTP port with
// "GET /.shoal/peer" and Upgrade: shoal-peer; after the 101 answer the
// connection carries internal/base/peerwire frames, the authenticated link the
// CDN tier uses between PoPs, keyed by the cluster key: an HKDF-derived
// AES-256-GCM key per direction and per connection, sequence numbers
// against replay, and a handshake in which each side proves the key before
// the other decodes anything. A peer without the key is refused and counted
// (Stats.Refused). Connections are persistent: each peer keeps a small pool
// of idle ones, one request in flight on each.
//
// Fetches of one object collapse (golang.org/x/sync/singleflight): while
// one is in flight, others for the same object wait for its bytes. The
// goroutine that does the fetch can stream each chunk to its client as it
// arrives (Fetch's sink).
//
// Memory bound (the project's rule that every buffer has a bound): an
// object the asking node will not cache goes through Stream, which hands
// each frame to the caller and keeps nothing, and is not collapsed (there
// is no body to share); the holder sends a file too large for its own
// memory (Local.PeerFile) by reading it in Chunk pieces into one reused
// buffer per connection. A fetch of any size then costs each side about
// one frame, not the object.
package peer

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"shoal/internal/base/peerwire"
)

// Path is the request path a node upgrades to a peer connection on its own
// port. Only connections accepted there (not handed-off client connections)
// may ask, and the front never forwards /.shoal/ from clients.
const Path = "/.shoal/peer"

// upgradeToken names the protocol in Upgrade (RFC 9110 §7.8).
const upgradeToken = "shoal-peer"

// Config is one node's side of its peer links. Zero fields take the
// documented defaults.
type Config struct {
	// Self is this node's index in Peers (the front's node index), -1 when
	// it is not listed. A decision naming Self is served from the local disk.
	Self int
	// Peers are the nodes' HTTP addresses (host:port) in the order of the
	// front's node list, so that policy.Decision.Fetch, a node index, names
	// one: the relay header and the passfd handoff field carry that index.
	Peers []string
	// Key is the cluster key (at least peerwire.MinSeed bytes).
	Key []byte
	// DialTimeout bounds connecting and the handshake. Default 2 s.
	DialTimeout time.Duration
	// FetchTimeout bounds the wait for each frame of a fetch. Default 5 s;
	// after it the fetch fails and the caller reads its own disk.
	FetchTimeout time.Duration
	// IdleTimeout closes a peer's connection that carried nothing this
	// long, and bounds how long a node serving a fetch waits for the asker
	// to take each frame: a streamed fetch (Stream) moves at the pace of
	// the asker's client, so a slow download must not be cut at
	// FetchTimeout. Default 60 s.
	IdleTimeout time.Duration
	// MaxIdle is the number of idle connections kept per peer. Default 4.
	MaxIdle int
	// DigestPeriod is how often the node sends its cache digest to every
	// peer; a digest older than three periods is forgotten. Default 2 s;
	// negative turns digests off.
	DigestPeriod time.Duration
	// Logger receives operational logs. Default slog.Default().
	Logger *slog.Logger
}

// Defaults for Config.
const (
	DefaultDialTimeout  = 2 * time.Second
	DefaultFetchTimeout = 5 * time.Second
	DefaultIdleTimeout  = 60 * time.Second
	DefaultMaxIdle      = 4
	DefaultDigestPeriod = 2 * time.Second
)

// Chunk is the largest body piece in one frame: the unit a streaming
// fetch forwards to its client.
const Chunk = 64 << 10

// Request names one representation: the site ("" without virtual hosts),
// the file's URL, the precompressed coding ("" for the identity), the
// ETag and size the asking node expects (its own table's; a negative size
// takes the holder's, for a node in cache mode, which knows no size before
// it has the response), and the node's cache key for it (what singleflight
// collapses on).
type Request struct {
	Site, URL, Coding, ETag string
	Size                    int64
	Key                     string
}

// Local is what a node lends its peers.
type Local interface {
	// PeerObject returns r's bytes from memory, or else from disk (keeping
	// them in memory as its replacement policy decides); mem reports a
	// memory hit. ErrNotFound when r names no file, ErrVersion when the
	// file's ETag is not r.ETag.
	PeerObject(r Request) (body []byte, mem bool, err error)
	// PeerFile lends r's body as a reader, with its size: the host reads
	// it in Chunk pieces, never whole, and closes it. A reader with a
	// FromMemory() bool method that answers true was in the node's memory
	// (the answer says so, as PeerObject's mem); any other was read from
	// disk. It returns a nil reader (and no error) when PeerObject should
	// answer; ErrNotFound and ErrVersion as PeerObject.
	PeerFile(r Request) (f io.ReadCloser, size int64, err error)
	// CacheKeys calls add with every key in the memory cache.
	CacheKeys(add func(key string))
}

// Errors a fetch may end with; the caller falls back to its own disk.
var (
	ErrNotFound = errors.New("peer: no such file")
	ErrVersion  = errors.New("peer: the peer holds another version")
	ErrPeer     = errors.New("peer: unknown peer index")
	ErrProtocol = errors.New("peer: protocol error")
	ErrClosed   = errors.New("peer: closed")
)

// Message kinds (first byte of a request frame) and answer statuses.
const (
	opGet    = 'G'
	opDigest = 'D'

	stOK       = 0
	stNotFound = 1
	stVersion  = 2
	stError    = 3
	stOKDisk   = 4 // as stOK, but the owner read its disk first (not a memory hit)
)

// Stats are the node's peer counters (status report and /metrics).
type Stats struct {
	// Fetches counts objects fetched from peers over the network;
	// FetchBytes their bytes; Collapsed the requests that waited for
	// another's fetch of the same object instead of making their own;
	// Failures the fetches that failed (the node then read its own disk).
	Fetches    uint64 `json:"fetches"`
	FetchBytes uint64 `json:"fetch_bytes"`
	Collapsed  uint64 `json:"collapsed"`
	Failures   uint64 `json:"failures"`
	// Served counts objects this node sent to peers, ServedBytes their
	// bytes, ServedDisk those it had to read from its disk first.
	Served      uint64 `json:"served"`
	ServedBytes uint64 `json:"served_bytes"`
	ServedDisk  uint64 `json:"served_disk"`
	// Refused counts peer connections refused in the handshake (no key)
	// or because the node already served maxConns.
	Refused uint64 `json:"refused"`
	// DigestsSent and DigestsReceived count cache digests exchanged;
	// DigestBits is the size of the last one sent, DigestKeys the keys it
	// holds and DigestFPR its expected false-positive rate; PeerDigests the
	// peers whose digest is current.
	DigestsSent     uint64  `json:"digests_sent"`
	DigestsReceived uint64  `json:"digests_received"`
	DigestBits      int     `json:"digest_bits"`
	DigestKeys      int     `json:"digest_keys"`
	DigestFPR       float64 `json:"digest_fpr"`
	PeerDigests     int     `json:"peer_digests"`
}

// Host is one node's peer service: the client side (Fetch), the server
// side (ServeConn) and the digest exchange. Safe for concurrent use.
type Host struct {
	cfg   Config
	local Local
	wst   peerwire.Stats
	sf    singleflight.Group

	// m is the membership: the peers, this node's index among them, a
	// connection pool and digest slot per peer, and the handshake
	// configurations naming this node. SetPeers replaces it whole.
	m atomic.Pointer[members]

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	maxConns int // maxConns; lowered by tests
	closed   bool
	stop     chan struct{}
	wg       sync.WaitGroup

	fetches, fetchBytes, collapsed, failures atomic.Uint64
	served, servedBytes, servedDisk          atomic.Uint64
	digSent, digRecv, digGen                 atomic.Uint64
	lastDigest                               atomic.Pointer[Bloom]
	// waiting counts Fetch calls in the singleflight group (tests).
	waiting atomic.Int64
}

// digestSlot is a peer's last digest and when it arrived (the digest loop's
// generation counter, so expiry needs no clock on the lookup path).
type digestSlot struct {
	b   atomic.Pointer[Bloom]
	gen atomic.Uint64
}

type pool struct {
	mu   sync.Mutex
	idle []*peerwire.Conn
	gone bool // the peer left the membership: put closes
}

// members is one membership of the cluster (Config.Self and Peers, or a
// later SetPeers). It is never changed once published: SetPeers builds a
// new one, keeping the pools and digests of the peers that stay.
type members struct {
	self     int
	peers    []string
	idx      map[string]int
	pools    []*pool
	digests  []*digestSlot
	cli, srv peerwire.Config
}

// New returns a Host for cfg serving local's objects. Start the digest
// exchange with Start; Close ends everything.
func New(cfg Config, local Local) (*Host, error) {
	if len(cfg.Key) < peerwire.MinSeed {
		return nil, fmt.Errorf("peer: cluster key of %d bytes, want at least %d", len(cfg.Key), peerwire.MinSeed)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = DefaultFetchTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxIdle <= 0 {
		cfg.MaxIdle = DefaultMaxIdle
	}
	if cfg.DigestPeriod == 0 {
		cfg.DigestPeriod = DefaultDigestPeriod
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Host{cfg: cfg, local: local, conns: make(map[net.Conn]struct{}), maxConns: maxConns, stop: make(chan struct{})}
	h.m.Store(h.newMembers(nil, cfg.Self, cfg.Peers))
	return h, nil
}

// newMembers builds the membership self, peers, reusing old's pool and
// digest of every peer whose address stays at its index (the front's
// indices are stable: a join appends, a leave blanks a slot).
func (h *Host) newMembers(old *members, self int, peers []string) *members {
	m := &members{self: self, peers: slices.Clone(peers), idx: make(map[string]int, len(peers)),
		pools: make([]*pool, len(peers)), digests: make([]*digestSlot, len(peers))}
	for i, a := range peers {
		if a != "" {
			m.idx[a] = i
		}
		if old != nil && i < len(old.peers) && old.peers[i] == a {
			m.pools[i], m.digests[i] = old.pools[i], old.digests[i]
		} else {
			m.pools[i], m.digests[i] = &pool{}, &digestSlot{}
		}
	}
	id := uint64(self + 1) // 0 when not listed
	logf := func(format string, args ...any) { h.cfg.Logger.Warn(fmt.Sprintf(format, args...)) }
	m.cli = peerwire.Config{Self: id, Seed: h.cfg.Key, MaxFrame: 1 << 20, HandshakeTimeout: h.cfg.DialTimeout,
		ReadTimeout: h.cfg.FetchTimeout, WriteTimeout: h.cfg.FetchTimeout, Stats: &h.wst}
	m.srv = peerwire.Config{Self: id, Seed: h.cfg.Key, MaxFrame: 1 << 20, HandshakeTimeout: h.cfg.DialTimeout,
		ReadTimeout: h.cfg.IdleTimeout, WriteTimeout: h.cfg.IdleTimeout, Stats: &h.wst, Log: logf}
	return m
}

// SetPeers replaces the membership while the node serves: peers are the
// nodes' addresses in the front's order ("" for a slot whose node left)
// and self this node's index among them (-1 when not listed). A node
// learns them from a version its coordinator published (members.go), the
// one source it trusts besides its configuration, so it dials only
// addresses its operator or its front named. Connections and digests of
// the peers that keep their index stay; those of the others are closed
// and dropped. Fetches in flight finish on the membership they started
// with.
func (h *Host) SetPeers(self int, peers []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.m.Load()
	m := h.newMembers(old, self, peers)
	h.m.Store(m)
	for i, p := range old.pools {
		if i < len(m.pools) && m.pools[i] == p {
			continue
		}
		p.mu.Lock()
		p.gone = true
		for _, c := range p.idle {
			c.Close()
		}
		p.idle = nil
		p.mu.Unlock()
	}
}

// Peers returns this node's index and the peers' addresses as it knows
// them now.
func (h *Host) Peers() (self int, peers []string) {
	m := h.m.Load()
	return m.self, slices.Clone(m.peers)
}

// Index returns the index of the peer at addr (a placement ID), false
// when it is not a member.
func (h *Host) Index(addr string) (int, bool) {
	i, ok := h.m.Load().idx[addr]
	return i, ok
}

// Stats returns the counters.
func (h *Host) Stats() Stats {
	st := Stats{
		Fetches: h.fetches.Load(), FetchBytes: h.fetchBytes.Load(), Collapsed: h.collapsed.Load(), Failures: h.failures.Load(),
		Served: h.served.Load(), ServedBytes: h.servedBytes.Load(), ServedDisk: h.servedDisk.Load(),
		Refused: h.wst.Refused.Load(), DigestsSent: h.digSent.Load(), DigestsReceived: h.digRecv.Load(),
	}
	if b := h.lastDigest.Load(); b != nil {
		st.DigestBits, st.DigestKeys, st.DigestFPR = b.Bits(), b.Keys(), b.FalsePositive()
	}
	for _, d := range h.m.Load().digests {
		if d.b.Load() != nil {
			st.PeerDigests++
		}
	}
	return st
}

// Self is this node's index.
func (h *Host) Self() int { return h.m.Load().self }

// Usable reports whether a decision naming peer i is one this host can
// act on: a listed peer other than itself.
func (h *Host) Usable(i int) bool { return h.m.Load().usable(i) }

func (m *members) usable(i int) bool {
	return i >= 0 && i < len(m.peers) && i != m.self && m.peers[i] != ""
}

// Close closes every peer connection and stops the digest loop.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	close(h.stop)
	for c := range h.conns {
		c.Close()
	}
	h.mu.Unlock()
	for _, p := range h.m.Load().pools {
		p.mu.Lock()
		for _, c := range p.idle {
			c.Close()
		}
		p.idle = nil
		p.mu.Unlock()
	}
	h.wg.Wait()
	return nil
}

// maxConns bounds the peer connections a node serves at once (each peer
// keeps up to MaxIdle idle plus one per fetch in flight); the handshake's
// deadline bounds how long a stranger may hold one of them.
const maxConns = 256

func (h *Host) track(c net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	if len(h.conns) >= h.maxConns {
		h.wst.Refused.Add(1)
		return false
	}
	h.conns[c] = struct{}{}
	return true
}

func (h *Host) untrack(c net.Conn) {
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
}

// UpgradeResponse is what a node writes before handing the connection to
// ServeConn.
const UpgradeResponse = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + upgradeToken + "\r\nConnection: Upgrade\r\n\r\n"

// ServeConn serves a peer on nc, an upgraded connection accepted on the
// node's port (the 101 already written), until it closes. A peer that
// cannot prove the cluster key is refused before anything it sends is
// decoded.
func (h *Host) ServeConn(nc net.Conn) {
	defer nc.Close()
	if !h.track(nc) {
		return
	}
	defer h.untrack(nc)
	c, err := peerwire.Server(nc, &h.m.Load().srv)
	if err != nil {
		return // counted and logged by peerwire
	}
	var out []byte
	for {
		msg, err := c.Recv()
		if err != nil || len(msg) == 0 {
			return
		}
		switch msg[0] {
		case opGet:
			if out, err = h.serveGet(c, msg[1:], out); err != nil {
				return
			}
		case opDigest:
			b, err := parseBloom(msg[1:])
			if err != nil {
				return
			}
			if m, i := h.m.Load(), int(c.Peer())-1; m.usable(i) {
				m.digests[i].b.Store(b)
				m.digests[i].gen.Store(h.digGen.Load())
				h.digRecv.Add(1)
			}
			if err := c.Send([]byte{stOK}); err != nil {
				return
			}
		default:
			return
		}
	}
}

// serveGet answers one fetch: a status frame with the size and the first
// chunk, then the rest in chunks.
func (h *Host) serveGet(c *peerwire.Conn, p []byte, out []byte) ([]byte, error) {
	r, err := parseRequest(p)
	if err != nil {
		return out, err
	}
	f, size, err := h.local.PeerFile(r)
	if f != nil {
		defer f.Close()
		m, _ := f.(interface{ FromMemory() bool })
		return h.serveFile(c, f, size, m != nil && m.FromMemory(), out)
	}
	var body []byte
	mem := false
	if err == nil {
		body, mem, err = h.local.PeerObject(r)
	}
	st := byte(stOK)
	switch {
	case errors.Is(err, ErrNotFound):
		st = stNotFound
	case errors.Is(err, ErrVersion):
		st = stVersion
	case err != nil:
		st = stError
	}
	if st == stOK && !mem {
		st = stOKDisk
	}
	out = append(out[:0], st)
	out = binary.BigEndian.AppendUint64(out, uint64(len(body)))
	if st != stOK && st != stOKDisk {
		return out, c.Send(out)
	}
	h.served.Add(1)
	h.servedBytes.Add(uint64(len(body)))
	if !mem {
		h.servedDisk.Add(1)
	}
	first := min(len(body), Chunk)
	out = append(out, body[:first]...)
	if err := c.Send(out); err != nil {
		return out, err
	}
	for off := first; off < len(body); off += Chunk {
		if err := c.Send(body[off:min(off+Chunk, len(body))]); err != nil {
			return out, err
		}
	}
	return out, nil
}

// serveFile sends size bytes of f like serveGet sends a body (stOK when
// mem, the body being in the node's memory, else stOKDisk), reading each
// chunk straight into out (grown once to a frame, and kept for the
// connection's next answers): the holder never holds the whole body on
// its heap. A file shorter than size (it shrank since the scan) ends the
// connection mid-answer, so the asker never takes a short body for the
// object.
func (h *Host) serveFile(c *peerwire.Conn, f io.Reader, size int64, mem bool, out []byte) ([]byte, error) {
	if cap(out) < 9+Chunk {
		out = make([]byte, 0, 9+Chunk)
	}
	st := byte(stOKDisk)
	if mem {
		st = stOK
	}
	out = append(out[:0], st)
	out = binary.BigEndian.AppendUint64(out, uint64(size))
	h.served.Add(1)
	h.servedBytes.Add(uint64(size)) // before sending, as serveGet counts
	if !mem {
		h.servedDisk.Add(1)
	}
	first := int(min(size, Chunk))
	if _, err := io.ReadFull(f, out[9:9+first]); err != nil {
		return out, fmt.Errorf("peer: read: %w", err)
	}
	if err := c.Send(out[:9+first]); err != nil {
		return out, err
	}
	for off := int64(first); off < size; {
		n := int(min(size-off, Chunk))
		if _, err := io.ReadFull(f, out[:n]); err != nil {
			return out, fmt.Errorf("peer: read: %w", err)
		}
		if err := c.Send(out[:n]); err != nil {
			return out, err
		}
		off += int64(n)
	}
	return out, nil
}

// Fetch gets r from peer i's memory. sink, if not nil, is called with each
// chunk as it arrives, in order, when this goroutine makes the fetch; a
// request that waited for another's fetch of the same object gets only the
// whole body (collapsed true). mem reports that the peer answered from its
// memory (false: it read its disk first), so the node can count a memory
// hit of the cluster (Status.MemoryBytes). On error the caller reads its
// own disk; sink may have received part of the body, sent bytes say how much.
func (h *Host) Fetch(i int, r Request, sink func([]byte)) (body []byte, mem, collapsed bool, err error) {
	m := h.m.Load()
	if !m.usable(i) {
		h.failures.Add(1)
		return nil, false, false, fmt.Errorf("%w %d", ErrPeer, i)
	}
	ran := false
	h.waiting.Add(1)
	defer h.waiting.Add(-1)
	var fn func([]byte) error
	if sink != nil {
		fn = func(b []byte) error { sink(b); return nil }
	}
	v, err, _ := h.sf.Do(r.Key+"\x00"+r.ETag, func() (any, error) {
		ran = true
		f, _, err := h.fetch(m, i, &r, fn, true)
		return f, err
	})
	if !ran {
		h.collapsed.Add(1)
	}
	if err != nil {
		if ran {
			h.failures.Add(1)
		}
		return nil, false, !ran, err
	}
	f := v.(fetched)
	return f.body, f.mem, !ran, nil
}

// fetched is one network fetch's result, shared by the requests it
// collapsed.
type fetched struct {
	body []byte
	mem  bool
}

// Stream gets r from peer i and hands each chunk to sink as it arrives,
// in order, keeping none of them: the fetch of an object the asking node
// will not cache, whose memory is one frame whatever the object's size.
// It is not collapsed (no body is kept for others to share). An error
// from sink stops the fetch (the connection, mid-answer, is closed) and is
// returned (not counted as a failure: the caller stopped it, as when its
// client left or the ranges it wanted are sent). n is the number of bytes
// handed to sink; on any error the caller decides what to do with those
// already forwarded.
func (h *Host) Stream(i int, r Request, sink func([]byte) error) (n int64, err error) {
	m := h.m.Load()
	if !m.usable(i) {
		h.failures.Add(1)
		return 0, fmt.Errorf("%w %d", ErrPeer, i)
	}
	_, n, err = h.fetch(m, i, &r, sink, false)
	var sk sinkError
	if errors.As(err, &sk) {
		return n, sk.err
	}
	if err != nil {
		h.failures.Add(1)
	}
	return n, err
}

// fetch makes one network fetch, redialling once when a pooled connection
// turns out to be dead before any byte of the answer. keep says whether to
// return the body (else only sink sees it); n counts the body bytes
// received.
func (h *Host) fetch(m *members, i int, r *Request, sink func([]byte) error, keep bool) (fetched, int64, error) {
	msg := appendRequest([]byte{opGet}, r)
	for attempt := 0; ; attempt++ {
		c, reused, err := h.get(m, i)
		if err != nil {
			return fetched{}, 0, err
		}
		body, n, mem, got, err := h.roundTrip(c, msg, r.Size, sink, keep)
		if err == nil {
			h.put(m, i, c)
			h.fetches.Add(1)
			h.fetchBytes.Add(uint64(n))
			return fetched{body, mem}, n, nil
		}
		var se statusError
		if errors.As(err, &se) {
			h.put(m, i, c) // the connection is fine, the object is not there
			return fetched{}, n, err
		}
		c.Close()
		var sk sinkError
		if errors.As(err, &sk) {
			return fetched{}, n, err
		}
		if reused && !got && attempt == 0 {
			continue
		}
		return fetched{}, n, fmt.Errorf("peer %d (%s): %w", i, m.peers[i], err)
	}
}

// sinkError is the caller's sink refusing a chunk (its client went away).
type sinkError struct{ err error }

func (e sinkError) Error() string { return e.err.Error() }
func (e sinkError) Unwrap() error { return e.err }

// statusError is a peer's refusal of one object.
type statusError struct{ err error }

func (e statusError) Error() string { return e.err.Error() }
func (e statusError) Unwrap() error { return e.err }

// roundTrip sends a request and reads the answer, handing each chunk to
// sink and, when keep is set, collecting the body. recv counts the body
// bytes received; mem reports that the peer answered from its memory; got
// whether any answer frame arrived.
func (h *Host) roundTrip(c *peerwire.Conn, msg []byte, size int64, sink func([]byte) error, keep bool) (body []byte, recv int64, mem, got bool, err error) {
	if err := c.Send(msg); err != nil {
		return nil, 0, false, false, err
	}
	p, err := c.Recv()
	if err != nil {
		return nil, 0, false, false, err
	}
	if len(p) < 9 {
		return nil, 0, false, true, ErrProtocol
	}
	switch p[0] {
	case stOK:
		mem = true
	case stOKDisk:
	case stNotFound:
		return nil, 0, false, true, statusError{ErrNotFound}
	case stVersion:
		return nil, 0, false, true, statusError{ErrVersion}
	default:
		return nil, 0, false, true, statusError{fmt.Errorf("%w: status %d", ErrProtocol, p[0])}
	}
	n := int64(binary.BigEndian.Uint64(p[1:9]))
	if n < 0 || size >= 0 && n != size {
		// The peer's file has our ETag but not our size: never trust it.
		return nil, 0, false, true, fmt.Errorf("%w: %d bytes announced, %d expected", ErrProtocol, n, size)
	}
	if keep {
		body = make([]byte, 0, n)
	}
	chunk := p[9:]
	for {
		if recv+int64(len(chunk)) > n {
			return nil, recv, false, true, fmt.Errorf("%w: more than %d bytes", ErrProtocol, n)
		}
		if keep {
			body = append(body, chunk...)
		}
		recv += int64(len(chunk))
		if sink != nil && len(chunk) > 0 {
			if err := sink(chunk); err != nil {
				return nil, recv, false, true, sinkError{err}
			}
		}
		if recv == n {
			return body, recv, mem, true, nil
		}
		if chunk, err = c.Recv(); err != nil {
			return nil, recv, false, true, err
		}
	}
}

// get returns an idle connection to peer i of membership m or dials one.
func (h *Host) get(m *members, i int) (c *peerwire.Conn, reused bool, err error) {
	p := m.pools[i]
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c = p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, true, nil
	}
	p.mu.Unlock()
	c, err = h.dial(m, i)
	return c, false, err
}

// put returns c to peer i's pool, closing it when the pool is full or the
// peer left.
func (h *Host) put(m *members, i int, c *peerwire.Conn) {
	p := m.pools[i]
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	p.mu.Lock()
	if !closed && !p.gone && len(p.idle) < h.cfg.MaxIdle {
		p.idle = append(p.idle, c)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	c.Close()
}

// dial connects to peer i's port, upgrades and runs the handshake.
func (h *Host) dial(m *members, i int) (*peerwire.Conn, error) {
	addr := m.peers[i]
	nc, err := net.DialTimeout("tcp", addr, h.cfg.DialTimeout)
	if err != nil {
		return nil, fmt.Errorf("peer %d: %w", i, err)
	}
	if err := upgrade(nc, addr, h.cfg.DialTimeout); err != nil {
		nc.Close()
		return nil, fmt.Errorf("peer %d (%s): %w", i, addr, err)
	}
	c, err := peerwire.Client(nc, &m.cli)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("peer %d: %w", i, err)
	}
	return c, nil
}

// upgrade asks for the peer protocol and reads the 101 answer byte by byte
// (the peer sends nothing after it until our handshake, so nothing may be
// read ahead).
func upgrade(nc net.Conn, addr string, timeout time.Duration) error {
	nc.SetDeadline(time.Now().Add(timeout))
	defer nc.SetDeadline(time.Time{})
	req := "GET " + Path + " HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: " + upgradeToken + "\r\nConnection: Upgrade\r\n\r\n"
	if _, err := nc.Write([]byte(req)); err != nil {
		return err
	}
	br := bufio.NewReaderSize(oneByte{nc}, 16)
	var head []byte
	for !strings.HasSuffix(string(head), "\r\n\r\n") {
		b, err := br.ReadByte()
		if err != nil {
			return fmt.Errorf("upgrade: %w", err)
		}
		if head = append(head, b); len(head) > 1024 {
			return fmt.Errorf("%w: upgrade answer too long", ErrProtocol)
		}
	}
	if !strings.HasPrefix(string(head), "HTTP/1.1 101 ") {
		line, _, _ := strings.Cut(string(head), "\r\n")
		return fmt.Errorf("%w: upgrade refused: %q", ErrProtocol, line)
	}
	return nil
}

// oneByte reads at most one byte per call, so bufio never reads ahead.
type oneByte struct{ r net.Conn }

func (o oneByte) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 1)]) }

// appendRequest encodes r: four length-prefixed strings and the size.
func appendRequest(dst []byte, r *Request) []byte {
	for _, s := range [...]string{r.Site, r.URL, r.Coding, r.ETag, r.Key} {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
		dst = append(dst, s...)
	}
	return binary.BigEndian.AppendUint64(dst, uint64(r.Size))
}

func parseRequest(p []byte) (Request, error) {
	var f [5]string
	for i := range f {
		if len(p) < 2 {
			return Request{}, ErrProtocol
		}
		n := int(binary.BigEndian.Uint16(p))
		if len(p) < 2+n {
			return Request{}, ErrProtocol
		}
		f[i], p = string(p[2:2+n]), p[2+n:]
	}
	if len(p) != 8 {
		return Request{}, ErrProtocol
	}
	return Request{Site: f[0], URL: f[1], Coding: f[2], ETag: f[3], Key: f[4], Size: int64(binary.BigEndian.Uint64(p))}, nil
}

// LoadKey reads the cluster key file: at least peerwire.MinSeed bytes,
// all of them the secret, in a file only its owner may read (like the DCDN
// seed: whoever reads it can fetch any node's objects and feed digests).
func LoadKey(path string) ([]byte, error) {
	k, err := peerwire.LoadSeed(path)
	if err != nil {
		return nil, fmt.Errorf("cluster key: %w", err)
	}
	return k, nil
}

// LoadOrCreateKey reads the cluster key at path, creating it first (32
// random bytes, hex, mode 0600) when it does not exist: `shoal up` keeps
// it in its data folder.
func LoadOrCreateKey(path string) ([]byte, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		var b [32]byte
		rand.Read(b[:])
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("cluster key: %w", err)
		}
		if err := os.WriteFile(path, []byte(hex.EncodeToString(b[:])), 0o600); err != nil {
			return nil, fmt.Errorf("cluster key: %w", err)
		}
	}
	return LoadKey(path)
}
