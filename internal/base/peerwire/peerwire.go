// Package peerwire is the authenticated link between two PoPs:
// a persistent TCP connection carrying length-prefixed, versioned
// binary frames, every one sealed with AES-256-GCM under keys only holders of
// the shared authentication seed can derive (seed 003 §3.1: a PoP joins the
// DCDN only with the authentication seed).
//
// Handshake: the client sends its version, ID and a fresh nonce, the server
// answers the same; then each side sends a sealed proof and checks the
// other's, so the client with a wrong seed can say so and the server refuses,
// counts and logs it. Keys are HKDF-SHA256(seed, salt = both nonces, info = direction,
// sender ID, receiver ID), one per direction and per connection, so a frame
// cannot be replayed on another connection or reflected back, and each frame
// carries a sequence number that must be exactly the next one (TCP keeps
// order, so anything else is a replay or a forgery). The length of a frame
// is checked against the cap and a read deadline is set before its body is
// read; nothing is decoded before the frame authenticates.
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
const Version = 1

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
	limit   int // frame cap: tiny until the peer has proved the seed
	hdr     [hdrLen]byte
	rbuf    []byte
	wbuf    []byte
}

const (
	nonceLen = 32
	helloLen = 1 + 8 + nonceLen           // version, id, nonce
	hdrLen   = 4 + 1 + 8                  // body length, version, sequence
	proof    = "shoal peerwire handshake" // sealed in the first frame of each side
)

// Peer returns the authenticated peer's ID.
func (c *Conn) Peer() uint64 { return c.peer }

// NetConn returns the underlying connection (for TCP_INFO).
func (c *Conn) NetConn() net.Conn { return c.nc }

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

func deriveKey(seed, salt []byte, from, to uint64) (cipher.AEAD, error) {
	info := binary.BigEndian.AppendUint64([]byte("shoal peerwire v1 "), from)
	info = binary.BigEndian.AppendUint64(info, to)
	k, err := hkdf.Key(sha256.New, seed, salt, string(info), 32)
	if err != nil {
		return nil, err
	}
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
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
// seed is refused, counted and logged.
func Server(nc net.Conn, cfg *Config) (*Conn, error) { return handshake(nc, cfg, false) }

func handshake(nc net.Conn, cfg *Config, client bool) (*Conn, error) {
	if len(cfg.Seed) < MinSeed {
		return nil, fmt.Errorf("peerwire: seed of %d bytes, want ≥ %d", len(cfg.Seed), MinSeed)
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = 1 << 20
	}
	nc.SetDeadline(time.Now().Add(cfg.HandshakeTimeout))
	defer nc.SetDeadline(time.Time{})
	mine := make([]byte, nonceLen)
	rand.Read(mine)
	var theirs []byte
	var peer uint64
	fail := func(err error) (*Conn, error) {
		return nil, fmt.Errorf("peer %s: %w", nc.RemoteAddr(), err)
	}
	in := make([]byte, helloLen)
	if client {
		if _, err := nc.Write(hello(cfg.Self, mine)); err != nil {
			return fail(err)
		}
	}
	if _, err := io.ReadFull(nc, in); err != nil {
		return fail(fmt.Errorf("handshake: %w", err))
	}
	peer, theirs, err := parseHello(in)
	if err != nil {
		return fail(err)
	}
	if !client {
		if _, err := nc.Write(hello(cfg.Self, mine)); err != nil {
			return fail(err)
		}
	}
	var salt []byte
	if client {
		salt = append(append(salt, mine...), theirs...)
	} else {
		salt = append(append(salt, theirs...), mine...)
	}
	// Until the peer has proved the seed, only the proof frame fits: an
	// unauthenticated peer cannot make this side allocate a full frame.
	c := &Conn{nc: nc, cfg: cfg, peer: peer, limit: len(proof) + 16}
	if c.send, err = deriveKey(cfg.Seed, salt, cfg.Self, peer); err != nil {
		return fail(err)
	}
	if c.recv, err = deriveKey(cfg.Seed, salt, peer, cfg.Self); err != nil {
		return fail(err)
	}
	// Both sides prove at once, so that each learns of a wrong seed: the
	// client to say so, the server to refuse, count and log.
	if err := c.Send([]byte(proof)); err != nil {
		return fail(err)
	}
	got, err := c.Recv()
	if err == nil && string(got) != proof {
		err = ErrAuth
	}
	if err != nil {
		if !client {
			cfg.stats().Refused.Add(1)
			cfg.logf("peerwire: refused %s (claims PoP %x): %v", nc.RemoteAddr(), peer, err)
		}
		return nil, fmt.Errorf("handshake: %w", err) // err names the peer
	}
	if !client {
		cfg.stats().Accepted.Add(1)
	}
	c.limit = cfg.MaxFrame
	return c, nil
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
	c.wbuf = b
	if c.cfg.WriteTimeout > 0 {
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
	if c.cfg.ReadTimeout > 0 {
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
	if cap(c.rbuf) < n {
		c.rbuf = make([]byte, n)
	}
	body := c.rbuf[:n]
	if _, err := io.ReadFull(c.nc, body); err != nil {
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
