package pop

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/mbpp"
	"shoal/internal/cdn/replica"
)

// protoCDN frames carry the content messages between PoPs (JSON: small
// control messages, already authenticated by peerwire).
const protoCDN byte = 3

// maxBatch bounds the bytes of keys one registration or hand-over message
// carries, well under peerwire's 1 MiB frame.
const maxBatch = 256 << 10

// Cache is what the content manager asks of the PoP's nodes, whose stores
// hold the copies (seed 003 §1: the content manager decides, the devices
// store). Keys are PoP keys (Key): a site and a path with its query, every
// Vary variant of a URL under one key.
type Cache interface {
	// Apply carries a purge out on every node: it removes (p.Soft:
	// marks stale) the stored responses p matches that were stored before
	// p.At plus the tolerated skew, and returns the PoP keys it touched,
	// sorted (after a hard purge none of their copies is left).
	Apply(p replica.Purge, margin time.Duration) []string
	// Drop removes every stored response of the keys (hashed: HashKey;
	// the window evicted them, seed 003 §3.1).
	Drop(keys []uint64)
	// TakeHits returns how often each key (hashed) was served from a
	// node's store since the last call (the nodes count, the manager sums
	// per window).
	TakeHits() map[uint64]int
	// Names returns the PoP keys of the hashed keys the nodes hold (to
	// announce hot ones by name).
	Names(keys []uint64) map[uint64]string
}

// HashKey is how the content manager names a PoP key: its Chord key (the
// first 64 bits of its SHA-256), 8 bytes a copy however long the URL, and
// the key its home is found by.
func HashKey(key string) uint64 { return uint64(chord.ContentKey("", key)) }

// ring is what the content manager needs of the PoP's peer layer: Chord
// for homes, MBPP for the view, the links for messages. The PoP implements
// it; tests put managers on an in-memory ring.
type ring interface {
	selfID() uint64
	lookup(ctx context.Context, key chord.ID) (chord.Peer, error)
	owns(key chord.ID) bool
	predecessor() (chord.Peer, bool)
	send(id uint64, addr string, m msg)
	view(now time.Time) []mbpp.PeerView
}

// msg is one content message between PoPs.
type msg struct {
	Op      string            `json:"op"`
	Req     uint64            `json:"req,omitempty"`
	Key     uint64            `json:"key,omitempty"`
	Items   []regItem         `json:"items,omitempty"`
	Holder  string            `json:"holder,omitempty"`
	Holders []string          `json:"holders,omitempty"`
	Gateway string            `json:"gateway,omitempty"`
	URL     string            `json:"url,omitempty"`
	Entries []chord.Entry     `json:"entries,omitempty"`
	Hops    int               `json:"hops,omitempty"`
	Purge   *replica.Purge    `json:"purge,omitempty"`
	Purges  []replica.Purge   `json:"purges,omitempty"`
	Vector  map[string]uint64 `json:"vector,omitempty"`
	From    string            `json:"from,omitempty"`
	// OriginNs is, in a holders answer, the home's smoothed time to the
	// origin in ns (0: not measured yet).
	OriginNs int64 `json:"origin_ns,omitempty"`
}

// regItem names one key (hashed: HashKey) in a registration message.
type regItem struct {
	Key uint64 `json:"k"`
}

// The content messages.
const (
	opQuery      = "query"      // → holders: who holds Key (asked of its home)
	opHolders    = "holders"    // the answer: Holders and the home's Gateway
	opRegister   = "register"   // Items are held by Holder
	opUnregister = "unregister" // Items are no longer held by Holder
	opNotMine    = "notmine"    // Items are not this PoP's keys: look their homes up again
	opHandOver   = "handover"   // Entries now belong to the receiver (a PoP joined before the sender)
	opPurge      = "purge"      // apply Purge → purged
	opPurged     = "purged"     // From applied it
	opSync       = "sync"       // what purges after Vector do you have? → purges
	opPurges     = "purges"     // Purges the asker lacks
	opPush       = "push"       // URL is hot at Holder: fetch a copy (seed 003 §3.1)
	opReregister = "reregister" // the sender's directory forgot the receiver's copies: register them there again
)

// manager is a PoP's content manager (seed 003 §3.1): the table of what
// its nodes hold, how often each was asked and where it is registered
// (replica.Table, by HashKey), the directory of the keys this PoP is home
// for, and the purge log. It keeps no bodies: those are in the nodes'
// stores (Cache).
type manager struct {
	r       ring
	cfg     replica.Config
	name    string
	gateway atomic.Pointer[string] // this PoP's gateway URL, what other PoPs fetch from
	cache   Cache
	log     *slog.Logger
	stats   *Counters
	warm    func(key string) // fetch a copy of key through this PoP (hot push)
	confirm time.Duration    // how long a purge waits for confirmations

	mu     sync.Mutex
	store  *replica.Table[uint64]
	dir    *replica.Home
	purges *replica.PurgeLog
	homes  map[uint64]uint64 // key → the home a fetch found, until it is stored
	gone   map[uint64]bool   // PoPs that left the view (watchView), not to be taken as homes
	pred   chord.Peer        // the Chord predecessor last seen

	rmu     sync.Mutex
	seq     uint64
	waiting map[uint64]chan msg
	warned  map[uint64]time.Time // PoP → when askHome last logged it

	// originRTT is the smoothed time to the origin's response header
	// (ns; 0 until the first origin fetch): the plan's SelfOrigin. It
	// counts the origin's own work too, so it errs long, towards asking
	// the holders (replica.Config.NearerOrigin).
	originRTT atomic.Int64

	// refreshDue is set while a refresh waits for Chord's repair
	// (refreshLater).
	refreshDue atomic.Bool
}

// noteOrigin folds one origin fetch's time to headers into originRTT,
// smoothed as MBPP smooths link RTT (A = 1/8, RFC 6298's α).
func (m *manager) noteOrigin(d time.Duration) {
	for {
		old := m.originRTT.Load()
		v := int64(d)
		if old != 0 {
			v = old + (int64(d)-old)/8
		}
		if m.originRTT.CompareAndSwap(old, v) {
			return
		}
	}
}

func newManager(r ring, cfg replica.Config, name, gateway string, cache Cache, log *slog.Logger, now time.Time) (*manager, error) {
	st, err := replica.NewTable[uint64](cfg, now)
	if err != nil {
		return nil, err
	}
	incarnation := strconv.FormatInt(now.UnixNano(), 36)
	m := &manager{r: r, cfg: cfg, name: name, cache: cache, log: log,
		stats: &Counters{}, warm: func(string) {}, confirm: confirmTimeout, store: st,
		dir: replica.NewHome(cfg), purges: replica.NewPurgeLog(cfg, name+"@"+incarnation),
		homes: map[uint64]uint64{}, gone: map[uint64]bool{}, waiting: map[uint64]chan msg{}}
	m.setGateway(gateway)
	return m, nil
}

// setGateway records this PoP's gateway URL once it listens.
func (m *manager) setGateway(u string) {
	u = strings.TrimSuffix(u, "/")
	m.gateway.Store(&u)
}

// gw is this PoP's gateway URL.
func (m *manager) gw() string { return *m.gateway.Load() }

// holderID is how this PoP names itself in directories: its ring ID (for
// its MBPP score) and its gateway URL (where the copy is fetched).
func (m *manager) holderID() string { return fmt.Sprintf("%016x|%s", m.r.selfID(), m.gw()) }

func parseHolder(h string) (uint64, string, bool) {
	id, gw, ok := strings.Cut(h, "|")
	v, err := strconv.ParseUint(id, 16, 64)
	return v, gw, ok && err == nil && (strings.HasPrefix(gw, "http://") || strings.HasPrefix(gw, "https://"))
}

// request sends m to PoP id and waits for the answer with m's number.
func (m *manager) request(ctx context.Context, id uint64, addr string, q msg) (msg, error) {
	ch := make(chan msg, 1)
	m.rmu.Lock()
	m.seq++
	q.Req = m.seq
	m.waiting[q.Req] = ch
	m.rmu.Unlock()
	defer func() {
		m.rmu.Lock()
		delete(m.waiting, q.Req)
		m.rmu.Unlock()
	}()
	m.r.send(id, addr, q)
	select {
	case a := <-ch:
		return a, nil
	case <-ctx.Done():
		return msg{}, fmt.Errorf("pop %016x: %s: %w", id, q.Op, ctx.Err())
	}
}

// answered hands an answer to its waiter.
func (m *manager) answered(a msg) {
	m.rmu.Lock()
	ch := m.waiting[a.Req]
	m.rmu.Unlock()
	if ch != nil {
		select {
		case ch <- a:
		default:
		}
	}
}

// onMsg handles a content message from PoP from.
func (m *manager) onMsg(from uint64, in msg) {
	switch in.Op {
	case opQuery:
		// The answer names every holder (seed 003 §1), this home too
		// when it holds the key. Left out, the asker ranked only the
		// other holders, and its plan tries every holder before the
		// shield: a miss 24 ms from a home holding the copy was
		// fetched from a holder 60 ms away (the WAN lab's scenario).
		self := m.holderID()
		m.mu.Lock()
		hs := m.dir.List(time.Now(), chord.ID(in.Key), self, m.store.Has(in.Key))
		m.mu.Unlock()
		m.r.send(from, "", msg{Op: opHolders, Req: in.Req, Holders: hs, Gateway: m.gw(), OriginNs: m.originRTT.Load()})
	case opRegister, opUnregister:
		m.onRegister(from, in)
	case opNotMine:
		m.onNotMine(in.Items)
	case opHandOver:
		m.onHandOver(in)
	case opPurge:
		if in.Purge != nil {
			m.applyPurge(*in.Purge)
		}
		m.r.send(from, "", msg{Op: opPurged, Req: in.Req, From: m.name})
	case opSync:
		m.mu.Lock()
		ps := m.purges.Since(in.Vector)
		m.mu.Unlock()
		m.r.send(from, "", msg{Op: opPurges, Req: in.Req, Purges: ps})
	case opPurges:
		for _, p := range in.Purges {
			m.applyPurge(p)
		}
		m.answered(in)
	case opPush:
		m.onPush(from, in)
	case opReregister:
		m.homeBack(from)
	case opHolders, opPurged:
		m.answered(in)
	}
}

// onPush: a PoP found URL hot and tells every PoP; one that lacks it
// fetches a copy through its own gateway, whose miss chain finds the
// pusher in the directory (passive fetch of pushed content, seed 003
// §3.1 "统计传输").
func (m *manager) onPush(from uint64, in msg) {
	id, _, ok := parseHolder(in.Holder)
	if !ok || id != from || in.URL == "" {
		return
	}
	m.mu.Lock()
	held := m.store.Has(HashKey(in.URL))
	m.mu.Unlock()
	if held {
		return
	}
	m.stats.PushesReceived.Add(1)
	go m.warm(in.URL)
}

// sendJSON encodes a content message as a frame.
func encodeMsg(m msg) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("content message %s: %w", m.Op, err)
	}
	return append([]byte{protoCDN}, b...), nil
}

// onCDNFrame decodes a content frame's body from PoP from and handles it.
func (m *manager) onCDNFrame(from uint64, body []byte) {
	var in msg
	if err := json.Unmarshal(body, &in); err != nil {
		m.log.Warn("bad content frame", "from", fmt.Sprintf("%016x", from), "err", err)
		return
	}
	m.onMsg(from, in)
}

// syncEvery is how often a PoP asks one PoP drawn at random for the purges
// it lacks: the anti-entropy that catches what a missed message or a
// partition left out, beside the sync on every PoP's return.
const syncEvery = 30 * time.Second

// run is the content manager's clock: the replication window, the
// directory's refresh, the purge anti-entropy, and a watch (every second)
// on the view and the ring. A PoP that comes back to the view (or is seen
// for the first time) is asked for the purges this one lacks; a PoP that
// leaves it is a dead home whose keys are registered again elsewhere (and
// a holder this PoP's directory forgets); one that comes back is a home
// whose directory forgot this PoP's copies, registered there again; a new
// Chord predecessor receives its share of the directory.
func (m *manager) run(ctx context.Context) {
	roll := time.NewTicker(m.cfg.Window)
	defer roll.Stop()
	refresh := time.NewTicker(m.cfg.RefreshEvery())
	defer refresh.Stop()
	sync := time.NewTicker(syncEvery)
	defer sync.Stop()
	watch := time.NewTicker(time.Second)
	defer watch.Stop()
	alive := map[uint64]bool{}
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return
		case now = <-roll.C:
			m.roll(now)
		case now = <-refresh.C:
			m.refresh(ctx, now)
		case now = <-sync.C:
			m.syncPurges(0, "", now)
		case now = <-watch.C:
			m.handOver(now)
			m.watchView(now, alive)
		}
	}
}

// watchView compares the view with the last one seen (alive, updated).
func (m *manager) watchView(now time.Time, alive map[uint64]bool) {
	for _, v := range m.r.view(now) {
		id := uint64(v.ID)
		was, seen := alive[id]
		alive[id] = v.Alive
		if !v.Self {
			m.mu.Lock()
			m.gone[id] = !v.Alive
			m.mu.Unlock()
		}
		switch {
		case v.Self:
		case v.Alive && seen && !was:
			m.syncPurges(id, v.Addr, now)
			m.homeBack(id)
			// This PoP's directory dropped id's entries when it left
			// the view, which id may not have seen happen (its own
			// view may never have lost this PoP): ask it to register
			// here again.
			m.r.send(id, v.Addr, msg{Op: opReregister})
		case v.Alive && !seen:
			m.syncPurges(id, v.Addr, now)
		case !v.Alive && seen && was:
			m.homeDied(id)
		}
	}
}
