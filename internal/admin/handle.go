package admin

import "net/http"

// Handle adds a route to the admin API behind the same access checks as
// its own (Config): `shoal pop` serves GET /pops and GET /chord this way.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }
