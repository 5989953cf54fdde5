package node

import (
	"context"
	"errors"
	"net/http"

	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/store"
)

func unauthorized(w http.ResponseWriter, detail string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="scafo"`)
	writeError(w, http.StatusUnauthorized, "unauthorized", detail)
}

// requireIngress admits the ingress token (and the admin token, which can do anything).
func (s *Server) requireIngress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r.Header.Get("Authorization"))
		if tok == "" {
			s.log.Warn("rejected ingress request: no bearer token", "path", r.URL.Path, "remote", r.RemoteAddr)
			unauthorized(w, "missing bearer token")
			return
		}
		if !tokenEqual(tok, s.ingressToken) && !tokenEqual(tok, s.adminToken) {
			s.log.Warn("rejected ingress request: bad token", "path", r.URL.Path, "remote", r.RemoteAddr)
			unauthorized(w, "invalid token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

type actorKey struct{}

// actorOf is who made a request (set by authenticate).
func actorOf(r *http.Request) fleetwrite.Actor {
	a, _ := r.Context().Value(actorKey{}).(fleetwrite.Actor)
	return a
}

// authenticate admits the admin token and application tokens
// ("scafo_<id>_<secret>", looked up in the store on every request so a revocation
// takes effect at once) and records who is calling. Authorization is the write
// domain's (per operation) and adminOnly's.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r.Header.Get("Authorization"))
		if tok == "" {
			s.log.Warn("rejected request: no bearer token", "path", r.URL.Path, "remote", r.RemoteAddr)
			unauthorized(w, "missing bearer token")
			return
		}
		var a fleetwrite.Actor
		switch {
		case tokenEqual(tok, s.adminToken):
			a.Admin = true
		default:
			rec, err := s.writer.LookupToken(r.Context(), tok)
			if errors.Is(err, store.ErrUnavailable) {
				s.writeDomainError(w, err)
				return
			}
			if err != nil {
				s.log.Warn("rejected request: bad token", "path", r.URL.Path, "remote", r.RemoteAddr)
				unauthorized(w, "invalid token")
				return
			}
			a.Token = rec
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), actorKey{}, a)))
	})
}

// adminOnly refuses application tokens.
func adminOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !actorOf(r).Admin {
			writeError(w, http.StatusForbidden, "forbidden", "this endpoint needs the admin token; application tokens act only on their own application's paths and instances")
			return
		}
		next.ServeHTTP(w, r)
	})
}
