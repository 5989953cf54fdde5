package node

import "github.com/go-chi/chi/v5"

// mountWrite registers the write API (applications, claims, path maps, instances,
// tokens, audit). See handlers_write.go.
func (s *Server) mountWrite(r chi.Router) {
	s.mountWriteRoutes(r)
}
