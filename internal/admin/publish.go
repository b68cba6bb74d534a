package admin

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
)

// Publisher publishes the site in the folder dir to every node and returns
// a JSON-encodable report (internal/publish.Coordinator.Publish).
type Publisher func(ctx context.Context, dir string) (any, error)

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
