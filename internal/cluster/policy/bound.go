package policy

// urlIndex is the bounded URL → dense id map under every per-URL table the
// policies keep: lard's targets, lardr's server sets and the URL
// distribution table of tbccrd and weblins. URLs are client input, so a
// scanner can send any number of distinct ones (a scan once left 223,867
// rows and +67 MB at the front). The index therefore holds at most max URLs
// whose lengths sum to at most maxBytes and makes room by evicting the
// least recently used URL, "used" meaning looked up by Pick. The recency
// order is an LRU threaded through slices indexed by id, so a hit costs a
// few slice writes and no allocation; a lookup is one map access.
//
// Ids are dense (0, 1, 2, … in order of first sight, as Replacer requires)
// and an evicted URL's id is reused by the next new URL, so every slice a
// policy indexes by id stays at most max long. Before an id is reused,
// onEvict lets the owner clear its state for it. While nothing has been
// evicted, ids and decisions are exactly those of an unbounded map, which
// is why the simulator's results do not change as long as a trace has fewer
// unique URLs than the bound. A single URL longer than maxBytes is still
// admitted (alone), so the bytes bound may be exceeded by at most one URL;
// the front's head limit bounds that URL.
type urlIndex struct {
	ids      map[string]int32
	urls     []string // by id; "" while the id is free
	order    *LRU
	free     []int32
	max      int
	maxBytes int64
	bytes    int64
	evicted  uint64
	onEvict  func(id int32)
}

func newURLIndex(max int, maxBytes int64) *urlIndex {
	return &urlIndex{ids: map[string]int32{}, order: NewLRU(), max: max, maxBytes: maxBytes}
}

// len is the number of URLs held.
func (x *urlIndex) len() int { return len(x.ids) }

// lookup returns url's id without touching the recency order.
func (x *urlIndex) lookup(url string) (int32, bool) {
	id, ok := x.ids[url]
	return id, ok
}

// get returns url's id, marking it most recently used, and reports whether
// it was just added; adding first evicts least recently used URLs until
// the new one fits both bounds.
func (x *urlIndex) get(url string) (int32, bool) {
	if id, ok := x.ids[url]; ok {
		x.order.Hit(id, 0)
		return id, false
	}
	for len(x.ids) > 0 && (len(x.ids) >= x.max || x.bytes+int64(len(url)) > x.maxBytes) {
		v, ok := x.order.Victim()
		if !ok {
			break
		}
		x.evicted++
		x.remove(v)
	}
	var id int32
	if n := len(x.free); n > 0 {
		id, x.free = x.free[n-1], x.free[:n-1]
	} else {
		id = int32(len(x.urls))
		x.urls = append(x.urls, "")
	}
	x.urls[id] = url
	x.ids[url] = id
	x.bytes += int64(len(url))
	x.order.Add(id, 0, 0)
	return id, true
}

// remove forgets id (evicted, or dropped because its URL proved
// unservable), lets the owner clear its state, and frees the id for reuse.
func (x *urlIndex) remove(id int32) {
	if int(id) >= len(x.urls) {
		return
	}
	url := x.urls[id]
	if cur, ok := x.ids[url]; !ok || cur != id {
		return // already free
	}
	delete(x.ids, url)
	x.bytes -= int64(len(url))
	x.urls[id] = ""
	x.order.Remove(id)
	if x.onEvict != nil {
		x.onEvict(id)
	}
	x.free = append(x.free, id)
}

// unservable reports whether a node's answer says the URL names nothing it
// can serve: 404 Not Found and 410 Gone (no such file) and 403 Forbidden
// (the node's content table refuses the path itself: a ".." escaping the
// root). These depend only on the path, so no request for an existing URL
// can produce them and an attacker cannot use them to evict a hot URL's
// entry. Other 4xx (400, 405, 408, 413, …) answer the request rather than
// the URL and leave the table alone; 5xx are the node's trouble, not the
// URL's.
func unservable(status int) bool {
	return status == 404 || status == 410 || status == 403
}
