package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
)

// Publisher publishes the site in the folder dir to every node and returns
// a JSON-encodable report (internal/cluster/publish.Coordinator.Publish).
type Publisher func(ctx context.Context, dir string) (any, error)

// VersionWriter writes the tar stream of published version v
// (internal/cluster/publish.Coordinator.WriteVersion).
type VersionWriter func(w io.Writer, v uint64) error

// SetVersions enables GET /publish/versions/{v}, from which nodes on other
// hosts fetch a version in the prepare phase. It always needs the bearer
// token, even on loopback: a version may hold pages not yet public.
func (s *Server) SetVersions(vw VersionWriter) { s.versions.Store(&vw) }

// version serves GET /publish/versions/{v}.
func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	vw := s.versions.Load()
	if vw == nil {
		writeErr(w, http.StatusNotFound, errors.New("this front serves no versions"))
		return
	}
	tok, ok := bearer(r)
	sum := sha256.Sum256([]byte(tok))
	if !ok || s.cfg.Token == "" || subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="shoal admin"`)
		writeErr(w, http.StatusUnauthorized, errors.New("versions are for the cluster's nodes: send the admin token"))
		return
	}
	v, err := strconv.ParseUint(r.PathValue("v"), 10, 64)
	if err != nil || v == 0 {
		writeErr(w, http.StatusBadRequest, errors.New("version must be a positive integer"))
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	if err := (*vw)(w, v); err != nil {
		// Before the first byte this is a clean 404; after it the node
		// sees a truncated stream and its prepare fails.
		writeErr(w, http.StatusNotFound, err)
	}
}

// SetPublisher enables POST /publish, which takes {"dir": "/abs/path"} —
// a folder on the host the admin API runs on — and answers with the
// publisher's report. Like every write it needs the bearer token. Without a
// publisher the endpoint answers 501.
func (s *Server) SetPublisher(p Publisher) { s.publisher.Store(&p) }

// publish serves POST /publish.
func (s *Server) publish(w http.ResponseWriter, r *http.Request) {
	pp := s.publisher.Load()
	if pp == nil {
		writeErr(w, http.StatusNotImplemented, errors.New("publishing is not set up on this front (it needs a versions folder: publish_dir)"))
		return
	}
	var body struct {
		Dir string `json:"dir"`
	}
	if err := decode(r, &body); err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	if body.Dir == "" || !filepath.IsAbs(body.Dir) {
		writeErr(w, http.StatusBadRequest, errors.New(`"dir" must be an absolute path on the front's host, e.g. {"dir": "/srv/site"}`))
		return
	}
	res, err := (*pp)(r.Context(), body.Dir)
	if err != nil {
		writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "result": res})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// Rebalancer places a partitioned site again after the membership changed
// (internal/cluster/publish.Coordinator.Rebalance): joined is the index of the
// node just added, -1 after a removal. It returns a JSON-encodable report.
type Rebalancer func(ctx context.Context, joined int) (any, error)

// SetRebalancer makes POST /nodes and DELETE /nodes/{i} rebalance the
// stored files over the new membership before they answer (a partitioned
// cluster, docs/cooperation.md "Partitioned storage"): the answer then
// carries the report as "rebalance", and DELETE answers 200 with a body
// instead of 204. A failed rebalance leaves the membership changed and
// answers 500 with the error; publishing or rebalancing again retries.
func (s *Server) SetRebalancer(rb Rebalancer) { s.rebalancer.Store(&rb) }

// rebalance runs the rebalancer, if any, and writes the answer for node i:
// code with {"index": i, "rebalance": report}, or 500 with the error. It
// reports whether it answered.
func (s *Server) rebalance(w http.ResponseWriter, r *http.Request, i, joined, code int) bool {
	rb := s.rebalancer.Load()
	if rb == nil {
		return false
	}
	res, err := (*rb)(r.Context(), joined)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"index": i, "error": err.Error(), "rebalance": res})
		return true
	}
	writeJSON(w, code, map[string]any{"index": i, "rebalance": res})
	return true
}
