package node

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"strconv"

	"shoal/internal/base/httpcache"
	"shoal/internal/base/store"
	"shoal/internal/cluster/peer"
)

// Peer fetch in cache mode (seed 001's cooperative cache, over the cluster
// tier's authenticated peer links, internal/cluster/peer): a node's miss
// asks the other nodes of its cluster (a PoP's nodes) before its upstream
// (for a PoP, the miss chain: other PoPs, the shield, the origin). The
// nodes that may hold the response: the one the front's decision names
// (its mirror of the nodes' memories, FetchHeader), then those whose cache
// digest (Summary Cache) has the key. A holder answers from its store
// only, never fetching on the asker's behalf (no chains, no loops), with
// the stored response's metadata ahead of its body. The asker takes the
// answer when it is fresh enough for the request, as a response from
// upstream: its Age is the holder's reckoning (the nodes of a PoP share a
// host and its clock), its Cache-Status names the holder, and the asker
// stores its copy as it would the origin's (a sibling cache's way: the
// front sends the key's later requests where it now finds it).

// peerFrameHead is what a holder sends ahead of a stored response on the
// peer link: the metadata's length (4 bytes, big-endian) and the body's
// (8 bytes); the metadata and the body follow.
const peerFrameHead = 12

// errPeerUnusable ends a peer fetch whose answer the request cannot use.
var errPeerUnusable = errors.New("node: the peer's copy does not answer the request")

// peerFile lends a peer the stored response under r.Key, counted as a
// hit; ErrNotFound when there is none (or only a Vary marker, whose
// variants the asker names by their own keys).
func (e *edge) peerFile(r peer.Request) (io.ReadCloser, int64, error) {
	hd, ok := e.store.Get(r.Key)
	if !ok {
		return nil, 0, peer.ErrNotFound
	}
	meta := hd.Meta()
	if len(meta) == 0 || meta[0] != metaResponse {
		hd.Release()
		return nil, 0, peer.ErrNotFound
	}
	e.hit(r.Key)
	head := make([]byte, peerFrameHead, peerFrameHead+len(meta))
	binary.BigEndian.PutUint32(head, uint32(len(meta)))
	binary.BigEndian.PutUint64(head[4:], uint64(hd.Size()))
	head = append(head, meta...)
	pr := &peerReader{h: hd}
	pr.r = io.MultiReader(bytes.NewReader(head), io.NewSectionReader(&pr.h, 0, hd.Size()))
	return pr, int64(len(head)) + hd.Size(), nil
}

// peerReader is a stored response read for a peer; Close releases it.
type peerReader struct {
	r io.Reader
	h store.Handle
}

func (p *peerReader) Read(b []byte) (int, error) { return p.r.Read(b) }
func (p *peerReader) Close() error               { p.h.Release(); return nil }

// FromMemory tells the peer host whether the body was in memory.
func (p *peerReader) FromMemory() bool { return p.h.InMemory() }

// fromPeer asks the nodes that may hold j's response and returns the
// first usable answer as an upstream response; false when none gave one.
func (e *edge) fromPeer(j *fetchJob) (*http.Response, bool) {
	if e.peers == nil || j.stale != nil || j.r.method != http.MethodGet {
		return nil, false
	}
	tried := -1
	if i := j.r.hint; e.peers.Usable(i) {
		if resp, ok := e.askPeer(i, j); ok {
			return resp, true
		}
		tried = i
	}
	for _, i := range e.peers.Holders(j.key) {
		if i == tried {
			continue
		}
		if resp, ok := e.askPeer(i, j); ok {
			return resp, true
		}
	}
	return nil, false
}

// askPeer fetches j's key from peer i, streaming: the answer's body is a
// pipe the peer link fills as the edge reads it.
func (e *edge) askPeer(i int, j *fetchJob) (*http.Response, bool) {
	pr, pw := io.Pipe()
	go func() {
		_, err := e.peers.Stream(i, peer.Request{Key: j.key, URL: j.key, Size: -1}, func(p []byte) error {
			_, err := pw.Write(p)
			return err
		})
		pw.CloseWithError(err) // nil: the body's end
	}()
	st, size, err := readPeerHead(pr)
	now := e.now()
	if err == nil && httpcache.Decide(&j.r.cache, st, now).Action != httpcache.Serve {
		err = errPeerUnusable
	}
	if err != nil {
		pr.CloseWithError(err)
		return nil, false
	}
	e.peerHits.Add(1)
	h := st.Header.Clone()
	h.Set("Age", strconv.FormatInt(st.Fresh.CurrentAge(st.ResponseTime, now), 10))
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	h["Cache-Status"] = append(h["Cache-Status"], e.cfg.Name+"; hit; detail=node-"+strconv.Itoa(i))
	return &http.Response{
		StatusCode: st.Status, Status: strconv.Itoa(st.Status) + " " + http.StatusText(st.Status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: pr, ContentLength: size, Request: j.out,
	}, true
}

// readPeerHead reads a holder's frame head and metadata: the stored
// response and its body's length.
func readPeerHead(r io.Reader) (*httpcache.Stored, int64, error) {
	var head [peerFrameHead]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, 0, err
	}
	ml, size := binary.BigEndian.Uint32(head[:]), int64(binary.BigEndian.Uint64(head[4:]))
	if ml > store.MaxMeta || size < 0 {
		return nil, 0, peer.ErrProtocol
	}
	meta := make([]byte, ml)
	if _, err := io.ReadFull(r, meta); err != nil {
		return nil, 0, err
	}
	st, err := decodeEntry(meta)
	return st, size, err
}
