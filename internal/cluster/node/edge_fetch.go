package node

import (
	"context"
	"io"
	"net/http"
	"time"

	"shoal/internal/base/httpcache"
	"shoal/internal/base/store"
)

// A flight is one fetch (or revalidation) of a cache key in progress.
// Concurrent misses for the key wait on it instead of fetching again, and
// look the store up once it is done (request collapsing). The fetch runs
// on its own goroutine with a context of its own, so it completes and
// stores the response even when the client that started it goes away.
type flight struct {
	done chan struct{} // closed when the body is stored (or dropped)
}

// fetched is what the fetch goroutine hands the request that started it:
// the response head, and the body as a pipe that the goroutine fills while
// it also writes the store (nil when the head is all there is).
type fetched struct {
	err    error
	resp   *http.Response // Body is the pipe (or http.NoBody)
	st     *httpcache.Stored
	stored bool // the response is being stored
	// revalidated: the upstream answered 304 to a revalidation and st is
	// the stored response updated from it; resp's body is empty.
	revalidated bool
	body        *io.PipeReader
}

// join returns the flight for key and whether the caller leads it (and
// must start the fetch); followers wait on flight.done.
func (e *edge) join(key string) (*flight, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if f, ok := e.flights[key]; ok {
		return f, false
	}
	f := &flight{done: make(chan struct{})}
	e.flights[key] = f
	return f, true
}

func (e *edge) land(key string, f *flight) {
	e.mu.Lock()
	if e.flights[key] == f {
		delete(e.flights, key)
	}
	e.mu.Unlock()
	close(f.done)
}

// fetchJob is one fetch: the request to send, the request it answers
// (for Storable and the variant key), the primary and flight keys, and the
// stored response being revalidated (nil for a plain fetch).
type fetchJob struct {
	out     *http.Request
	r       *edgeReq
	primary string
	key     string
	fl      *flight
	stale   *httpcache.Stored
	stream  bool // hand the body to the caller through a pipe
}

// startFetch runs j on its own goroutine and returns the channel its head
// arrives on.
func (e *edge) startFetch(j *fetchJob) <-chan fetched {
	ch := make(chan fetched, 1)
	go e.fetch(j, ch)
	return ch
}

// fetch sends the request upstream and stores what may be stored: a 304 to
// a revalidation updates the stored response's metadata; a storable
// response is written to the store as its body streams in, and to the
// caller's pipe when it wants the body. The caller leaving (closing its
// end of the pipe) does not stop the store's copy.
func (e *edge) fetch(j *fetchJob, ch chan<- fetched) {
	defer e.land(j.key, j.fl)
	// The fetch is nobody's request: its context ends only when the
	// upstream stalls for IdleTimeout (then the body read fails and the
	// entry is dropped), so collapsed requests never wait forever.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	idle := time.AfterFunc(e.cfg.UpstreamIdle, cancel)
	defer idle.Stop()
	reqTime := e.now()
	resp, ok := e.fromPeer(j)
	var err error
	if !ok {
		resp, err = e.up.Fetch(ctx, j.out.WithContext(ctx))
	}
	if err != nil {
		ch <- fetched{err: err}
		return
	}
	defer resp.Body.Close()
	respTime := e.now()
	if j.stale != nil && resp.StatusCode == http.StatusNotModified {
		st := j.stale.Update(e.cfg.Cache, resp.Header, reqTime, respTime)
		if e.store.SetMeta(j.key, encodeEntry(st)) != nil {
			e.putMeta(j.key, st)
		}
		e.revalidated.Add(1)
		resp.Body = http.NoBody
		ch <- fetched{resp: resp, st: st, revalidated: true}
		return
	}
	st := httpcache.NewStored(e.cfg.Cache, resp.StatusCode, resp.Header, reqTime, respTime)
	var w *store.Writer
	if ok, _ := httpcache.Storable(e.cfg.Cache, &j.r.cache, resp.StatusCode, resp.Header, &st.Fresh); ok && j.r.method == "GET" {
		w = e.create(j, st, resp.ContentLength)
	}
	var pr *io.PipeReader
	var pw *io.PipeWriter
	if j.stream {
		pr, pw = io.Pipe()
	}
	ch <- fetched{resp: resp, st: st, stored: w != nil, body: pr}
	if e.copyBody(&idleReader{r: resp.Body, t: idle, d: e.cfg.UpstreamIdle}, w, pw) && e.cfg.OnStored != nil {
		e.cfg.OnStored(j.primary)
	}
}

// idleReader restarts an idle timer at each read that returns bytes.
type idleReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.t.Reset(r.d)
	}
	return n, err
}

// create opens the store entry for a fetched response: under the variant
// key when it varies (with a marker at the primary key naming the fields),
// else under the primary key itself.
func (e *edge) create(j *fetchJob, st *httpcache.Stored, size int64) *store.Writer {
	key := j.primary
	if len(st.Vary) > 0 {
		key = httpcache.VariantKey(j.primary, st.Vary, j.r.header)
		if mw, err := e.store.Create(j.primary, encodeMarker(st.Vary), 0); err == nil {
			if mw.Commit() != nil {
				return nil
			}
		}
	}
	w, err := e.store.Create(key, encodeEntry(st), size)
	if err != nil {
		return nil
	}
	return w
}

// putMeta stores a bodiless entry (the revalidated entry vanished meanwhile).
func (e *edge) putMeta(key string, st *httpcache.Stored) {
	if st.Status != http.StatusNoContent {
		return // a body is needed, and gone
	}
	if w, err := e.store.Create(key, encodeEntry(st), 0); err == nil {
		w.Commit()
	}
}

// copyBody copies the upstream body to the store writer and the pipe. A
// failed pipe write (the client went away) stops only the pipe; a failed
// store write aborts the entry; an upstream error aborts both. It reports
// whether the entry was committed.
func (e *edge) copyBody(body io.Reader, w *store.Writer, pw *io.PipeWriter) (stored bool) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		if w == nil && pw == nil {
			return false
		}
		n, err := body.Read(buf)
		if n > 0 {
			e.upstreamBytes.Add(int64(n))
			if w != nil {
				if _, werr := w.Write(buf[:n]); werr != nil {
					w.Abort()
					w = nil
				}
			}
			if pw != nil {
				if _, perr := pw.Write(buf[:n]); perr != nil {
					pw = nil
				}
			}
		}
		if err == io.EOF {
			if w != nil && w.Commit() == nil {
				e.stored.Add(1)
				stored = true
			}
			if pw != nil {
				pw.Close()
			}
			return stored
		}
		if err != nil {
			if w != nil {
				w.Abort()
			}
			if pw != nil {
				pw.CloseWithError(err)
			}
			return false
		}
	}
}
