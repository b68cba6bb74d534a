// Package peerwire is the authenticated link between two PoPs (and between
// the nodes of one cluster): a persistent TCP connection carrying
// length-prefixed, versioned binary frames, every one sealed with
// AES-256-GCM under keys only holders of the shared authentication seed can
// derive (seed 003 §3.1: a PoP joins the DCDN only with the authentication
// seed).
//
// Handshake: the client sends its version, ID and a fresh nonce, the server
// answers the same; then each side sends a sealed proof and checks the
// other's, so the client with a wrong seed can say so and the server refuses,
// counts and logs it. Both keys are HKDF-SHA256(seed, salt = SHA-256 of the
// two hellos, info = the direction), so they are bound to the whole
// transcript (both IDs and both nonces) and to the role: the client-to-server
// key is never the server-to-client key, even when a hello names the other
// side's own ID, so a keyless peer cannot echo a side's proof or frames back
// to it (a reflection attack, as on challenge-response protocols whose two
// directions share a key). A hello naming the receiver's own ID, or echoing
// its nonce, is refused outright. Each proof also names its role and the
// transcript. Each frame carries a sequence number that must be exactly the
// next one (TCP keeps order, so anything else is a replay or a forgery).
//
// Bounds: the handshake deadline holds from the first byte to the last
// proof; until the peer has proved the seed only a proof-sized frame is
// accepted; afterwards a frame's length is checked against the cap and its
// buffer grows only as its bytes arrive, and buffers larger than a chunk
// are not kept between frames, so an idle link costs little memory. Nothing
// is decoded before the frame authenticates.
package peerwire

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Version is the frame format version; a peer speaking another is refused.
// Version 2 binds keys and proofs to the role and the transcript.
const Version = 2

// Errors; each is wrapped with the peer's address.
var (
	// ErrAuth: the peer does not share our seed, or a frame was altered.
	ErrAuth = errors.New("peerwire: authentication failed (the peer does not share this seed, or the frame was altered)")
	// ErrReplay: a frame's sequence number is not the next one.
	ErrReplay = errors.New("peerwire: frame out of sequence (replayed or dropped)")
	// ErrTooLarge: a frame's length exceeds the cap.
	ErrTooLarge = errors.New("peerwire: frame exceeds the size cap")
	// ErrVersion: the peer speaks another version.
	ErrVersion = errors.New("peerwire: unsupported version")
	// ErrOwnID: the peer's hello names this side's own ID or nonce: a
	// reflection of this side's own messages, or two PoPs sharing a name.
	ErrOwnID = errors.New("peerwire: the peer claims this side's own ID (a reflected handshake, or two peers with one ID)")
)

// Stats counts refusals; shared by every connection of a Config.
type Stats struct {
	Accepted, Refused, Replays, Oversized, Tampered atomic.Uint64
}

// Config is one PoP's side of every link.
type Config struct {
	// Self is this PoP's ID, bound into every key.
	Self uint64
	// Seed is the shared authentication secret (LoadSeed).
	Seed []byte
	// MaxFrame caps a frame's body. Default 1 MiB.
	MaxFrame int
	// HandshakeTimeout bounds the handshake; ReadTimeout each frame read
	// (a peer link carries a token at least every few seconds).
	HandshakeTimeout, ReadTimeout, WriteTimeout time.Duration
	// Log receives one line per refusal; nil is silent.
	Log func(format string, args ...any)
	// Stats, if set, counts refusals.
	Stats *Stats
}

// DefaultConfig returns the defaults.
func DefaultConfig(self uint64, seed []byte) Config {
	return Config{Self: self, Seed: seed, MaxFrame: 1 << 20, HandshakeTimeout: 5 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 10 * time.Second}
}

// MinSeed is the shortest accepted seed.
const MinSeed = 16

// LoadSeed reads the authentication seed file: at least MinSeed bytes, all
// of which are the secret. Like the admin token, a file that group or
// others may read is refused: whoever reads it can join the DCDN.
func LoadSeed(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("seed file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("seed file %s: mode %v lets others read the DCDN's secret; fix: chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("seed file: %w", err)
	}
	if len(b) < MinSeed {
		return nil, fmt.Errorf("seed file %s: %d bytes, want at least %d (e.g. (umask 077; head -c 32 /dev/urandom > %s))", path, len(b), MinSeed, path)
	}
	return b, nil
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(format, args...)
	}
}

func (c *Config) stats() *Stats {
	if c.Stats == nil {
		c.Stats = &Stats{}
	}
	return c.Stats
}

// Conn is an authenticated link. Send is safe for concurrent use; Recv is
// for one reader.
type Conn struct {
	nc      net.Conn
	cfg     *Config
	peer    uint64
	send    cipher.AEAD
	recv    cipher.AEAD
	wmu     sync.Mutex
	sendSeq uint64
	recvSeq uint64
	limit   int  // frame cap: proof-sized until the peer has proved the seed
	shaking bool // in the handshake: its deadline holds, frames set none
	hdr     [hdrLen]byte
	rbuf    []byte
	wbuf    []byte
}

const (
	nonceLen = 32
	helloLen = 1 + 8 + nonceLen // version, id, nonce
	hdrLen   = 4 + 1 + 8        // body length, version, sequence
	// clientProof and serverProof open each side's first frame, followed by
	// the transcript hash: a proof names its role, so neither can stand in
	// for the other.
	clientProof = "shoal peerwire v2 client proof"
	serverProof = "shoal peerwire v2 server proof"
	// maxKept is the largest frame buffer a link keeps between frames: a
	// node peer link's 64 KiB chunk and its framing. Larger frames
	// (digests, at most a few per period) get a buffer of their own.
	maxKept = 96 << 10
	// growStep is the first read buffer: a frame's buffer doubles from it
	// as the frame's bytes arrive, never ahead of them.
	growStep = 4 << 10
)

// Peer returns the authenticated peer's ID.
func (c *Conn) Peer() uint64 { return c.peer }

// NetConn returns the underlying connection (for TCP_INFO).
func (c *Conn) NetConn() net.Conn { return c.nc }

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// deriveKey returns the AEAD for one direction ("client to server" or
// "server to client") of the connection whose transcript hash is th.
func deriveKey(seed, th []byte, dir string) (cipher.AEAD, error) {
	k, err := hkdf.Key(sha256.New, seed, th, "shoal peerwire v2 "+dir, 32)
	if err != nil {
		return nil, err
	}
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// transcript hashes the two hellos, client's first: both IDs, both
// nonces and the version, everything each side said before its proof.
func transcript(clientHello, serverHello []byte) []byte {
	h := sha256.New()
	h.Write([]byte("shoal peerwire v2 transcript"))
	h.Write(clientHello)
	h.Write(serverHello)
	return h.Sum(nil)
}

func hello(id uint64, nonce []byte) []byte {
	b := []byte{Version}
	b = binary.BigEndian.AppendUint64(b, id)
	return append(b, nonce...)
}

func parseHello(b []byte) (uint64, []byte, error) {
	if b[0] != Version {
		return 0, nil, fmt.Errorf("%w %d (this PoP speaks %d)", ErrVersion, b[0], Version)
	}
	return binary.BigEndian.Uint64(b[1:9]), b[9:], nil
}

// Client runs the handshake on an outgoing connection.
func Client(nc net.Conn, cfg *Config) (*Conn, error) { return handshake(nc, cfg, true) }

// Server runs the handshake on an accepted connection. A peer without the
// seed, or claiming this side's own ID, is refused, counted and logged.
func Server(nc net.Conn, cfg *Config) (*Conn, error) { return handshake(nc, cfg, false) }

func handshake(nc net.Conn, cfg *Config, client bool) (*Conn, error) {
	if len(cfg.Seed) < MinSeed {
		return nil, fmt.Errorf("peerwire: seed of %d bytes, want ≥ %d", len(cfg.Seed), MinSeed)
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = 1 << 20
	}
	// One deadline for the whole handshake: hellos and both proofs.
	nc.SetDeadline(time.Now().Add(cfg.HandshakeTimeout))
	defer nc.SetDeadline(time.Time{})
	c, th, err := exchangeHellos(nc, cfg, client)
	if err == nil {
		err = c.prove(th, client)
	}
	if err != nil {
		if !client && !errors.Is(err, errIO) {
			cfg.stats().Refused.Add(1)
			cfg.logf("peerwire: refused %s (claims PoP %x): %v", nc.RemoteAddr(), c.claimed(), err)
		}
		return nil, fmt.Errorf("peer %s: handshake: %w", nc.RemoteAddr(), err)
	}
	if !client {
		cfg.stats().Accepted.Add(1)
	}
	c.limit, c.shaking = cfg.MaxFrame, false
	return c, nil
}

// errIO marks a handshake that failed on the wire (a closed or silent
// connection) rather than on a refusal: not counted as refused.
var errIO = errors.New("connection")

// claimed returns the ID a (possibly refused) peer claimed; c may be nil.
func (c *Conn) claimed() uint64 {
	if c == nil {
		return 0
	}
	return c.peer
}

// exchangeHellos sends and reads the hellos (the client speaks first),
// refuses a hello that names this side's own ID or nonce, and derives the
// connection's keys from the transcript. The returned Conn names the
// claimed peer even on a refusal.
func exchangeHellos(nc net.Conn, cfg *Config, client bool) (*Conn, []byte, error) {
	mine := hello(cfg.Self, nil)
	mine = append(mine, make([]byte, nonceLen)...)
	rand.Read(mine[9:])
	if client {
		if _, err := nc.Write(mine); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", errIO, err)
		}
	}
	in := make([]byte, helloLen)
	if _, err := io.ReadFull(nc, in); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errIO, err)
	}
	peer, theirs, err := parseHello(in)
	if err != nil {
		return nil, nil, err
	}
	// Until the peer has proved the seed, only the proof frame fits: an
	// unauthenticated peer cannot make this side allocate a full frame.
	c := &Conn{nc: nc, cfg: cfg, peer: peer, limit: len(clientProof) + sha256.Size + 16, shaking: true}
	if peer == cfg.Self || string(theirs) == string(mine[9:]) {
		return c, nil, ErrOwnID
	}
	if !client {
		if _, err := nc.Write(mine); err != nil {
			return c, nil, fmt.Errorf("%w: %w", errIO, err)
		}
	}
	th := transcript(in, mine)
	if client {
		th = transcript(mine, in)
	}
	c2s, err := deriveKey(cfg.Seed, th, "client to server")
	if err != nil {
		return c, nil, err
	}
	s2c, err := deriveKey(cfg.Seed, th, "server to client")
	if err != nil {
		return c, nil, err
	}
	c.send, c.recv = s2c, c2s
	if client {
		c.send, c.recv = c2s, s2c
	}
	return c, th, nil
}

// prove sends this side's proof and checks the peer's. Both sides prove at
// once, so that each learns of a wrong seed: the client to say so, the
// server to refuse, count and log.
func (c *Conn) prove(th []byte, client bool) error {
	own, want := serverProof, clientProof
	if client {
		own, want = clientProof, serverProof
	}
	if err := c.Send(append([]byte(own), th...)); err != nil {
		return fmt.Errorf("%w: %w", errIO, err)
	}
	got, err := c.Recv()
	if err != nil {
		return err
	}
	if string(got) != want+string(th) {
		return ErrAuth
	}
	return nil
}

// Send seals payload in one frame.
func (c *Conn) Send(payload []byte) error {
	if len(payload)+c.send.Overhead() > c.cfg.MaxFrame {
		return fmt.Errorf("peer %s: %w: %d bytes", c.nc.RemoteAddr(), ErrTooLarge, len(payload))
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.sendSeq++
	n := len(payload) + c.send.Overhead()
	b := c.wbuf[:0]
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = append(b, Version)
	b = binary.BigEndian.AppendUint64(b, c.sendSeq)
	b = c.send.Seal(b, nonce(c.sendSeq), payload, b[:hdrLen])
	if cap(b) <= maxKept {
		c.wbuf = b
	}
	if c.cfg.WriteTimeout > 0 && !c.shaking {
		c.nc.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout))
	}
	if _, err := c.nc.Write(b); err != nil {
		return fmt.Errorf("peer %s: %w", c.nc.RemoteAddr(), err)
	}
	return nil
}

func nonce(seq uint64) []byte {
	var n [12]byte
	binary.BigEndian.PutUint64(n[4:], seq)
	return n[:]
}

// Recv reads and opens the next frame. The returned slice is valid until
// the next Recv. Any error leaves the connection unusable: close it.
func (c *Conn) Recv() ([]byte, error) {
	if c.cfg.ReadTimeout > 0 && !c.shaking {
		c.nc.SetReadDeadline(time.Now().Add(c.cfg.ReadTimeout))
	}
	if _, err := io.ReadFull(c.nc, c.hdr[:]); err != nil {
		return nil, fmt.Errorf("peer %s: %w", c.nc.RemoteAddr(), err)
	}
	n := int(binary.BigEndian.Uint32(c.hdr[:4]))
	if c.hdr[4] != Version {
		return nil, fmt.Errorf("peer %s: %w %d", c.nc.RemoteAddr(), ErrVersion, c.hdr[4])
	}
	if n > c.limit || n < c.recv.Overhead() {
		c.cfg.stats().Oversized.Add(1)
		c.cfg.logf("peerwire: %s sent a frame of %d bytes (cap %d)", c.nc.RemoteAddr(), n, c.limit)
		return nil, fmt.Errorf("peer %s: %w: %d > %d", c.nc.RemoteAddr(), ErrTooLarge, n, c.limit)
	}
	seq := binary.BigEndian.Uint64(c.hdr[5:])
	body, err := c.readBody(n)
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", c.nc.RemoteAddr(), err)
	}
	out, err := c.recv.Open(body[:0], nonce(seq), body, c.hdr[:])
	if err != nil {
		c.cfg.stats().Tampered.Add(1)
		return nil, fmt.Errorf("peer %s: %w", c.nc.RemoteAddr(), ErrAuth)
	}
	// Authentic but not the next one: a replay of this connection's own
	// frame (checked after opening, so a forger cannot probe it).
	if seq != c.recvSeq+1 {
		c.cfg.stats().Replays.Add(1)
		c.cfg.logf("peerwire: %s sent frame %d, expected %d", c.nc.RemoteAddr(), seq, c.recvSeq+1)
		return nil, fmt.Errorf("peer %s: %w: got %d, want %d", c.nc.RemoteAddr(), ErrReplay, seq, c.recvSeq+1)
	}
	c.recvSeq = seq
	return out, nil
}

// readBody reads an n-byte frame body into a buffer that grows (doubling
// from growStep) only as bytes arrive, so a length is never believed ahead
// of the bytes behind it. The buffer is kept for the next frame only up to
// maxKept.
func (c *Conn) readBody(n int) ([]byte, error) {
	buf := c.rbuf[:0]
	for len(buf) < n {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(n, max(2*cap(buf), growStep)))
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(c.nc, buf[len(buf):min(n, cap(buf))])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, err
		}
	}
	if cap(buf) <= maxKept {
		c.rbuf = buf
	}
	return buf, nil
}
