package node

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
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

// requireIngressOrAdmin is requireIngress under another name, for read endpoints that
// both operators (admin) and ingresses may use.
func (s *Server) requireIngressOrAdmin(next http.Handler) http.Handler {
	return s.requireIngress(next)
}

// principal is who made a request.
type principal struct {
	admin   bool
	ingress bool
	token   fleet.TokenRecord
}

func (p principal) actor() string {
	switch {
	case p.admin:
		return "admin"
	case p.token.ID != "":
		return "token:" + p.token.ID
	default:
		return "anonymous"
	}
}

type principalKey struct{}

func principalOf(r *http.Request) principal {
	p, _ := r.Context().Value(principalKey{}).(principal)
	return p
}

// authenticate admits the admin token and application tokens
// ("scafo_<id>_<secret>", looked up in the store on every request so a revocation
// takes effect at once) and records who is calling. Authorization is per handler.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r.Header.Get("Authorization"))
		if tok == "" {
			s.log.Warn("rejected request: no bearer token", "path", r.URL.Path, "remote", r.RemoteAddr)
			unauthorized(w, "missing bearer token")
			return
		}
		var p principal
		switch {
		case tokenEqual(tok, s.adminToken):
			p.admin = true
		default:
			rec, err := s.lookupAppToken(r.Context(), tok)
			if errors.Is(err, store.ErrUnavailable) {
				s.storeError(w, "checking token", err)
				return
			}
			if err != nil {
				s.log.Warn("rejected request: bad token", "path", r.URL.Path, "remote", r.RemoteAddr)
				unauthorized(w, "invalid token")
				return
			}
			p.token = rec
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

var errBadToken = errors.New("invalid token")

func (s *Server) lookupAppToken(ctx context.Context, tok string) (fleet.TokenRecord, error) {
	rest, ok := strings.CutPrefix(tok, "scafo_")
	if !ok {
		return fleet.TokenRecord{}, errBadToken
	}
	id, _, ok := strings.Cut(rest, "_")
	if !ok || !isHexID(id) {
		return fleet.TokenRecord{}, errBadToken
	}
	obj, err := s.st.Get(ctx, fleet.PrefixTokens+id+".json")
	if errors.Is(err, store.ErrNotFound) {
		return fleet.TokenRecord{}, errBadToken
	}
	if err != nil {
		return fleet.TokenRecord{}, err
	}
	var rec fleet.TokenRecord
	if err := json.Unmarshal(obj.Value, &rec); err != nil {
		return fleet.TokenRecord{}, errBadToken
	}
	got := hashToken(tok)
	if subtle.ConstantTimeCompare([]byte(got), []byte(rec.SHA256)) != 1 {
		return fleet.TokenRecord{}, errBadToken
	}
	return rec, nil
}

// adminOnly refuses application tokens.
func (s *Server) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !principalOf(r).admin {
			writeError(w, http.StatusForbidden, "forbidden", "this endpoint needs the admin token; application tokens act only on their own application's paths and instances")
			return
		}
		h(w, r)
	}
}

// authorizeApp lets the admin through, and an application token only for its own
// application, with one of roles, and never on the control-plane application (its
// hostname must never be path-routed by a CI or router credential).
func (s *Server) authorizeApp(w http.ResponseWriter, r *http.Request, app fleet.App, roles ...string) bool {
	p := principalOf(r)
	if p.admin {
		return true
	}
	t := p.token
	switch {
	case app.ControlPlane:
		writeError(w, http.StatusForbidden, "control plane", "application tokens are refused on the control-plane application "+app.Name)
	case t.App != app.Name || t.Account != app.Account:
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("token %s is scoped to application %s (account %s), not %s", t.ID, t.App, t.Account, app.Name))
	case !hasAnyRole(t.Roles, roles):
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("token %s lacks a role for this (needs one of %s)", t.ID, strings.Join(roles, ", ")))
	default:
		return true
	}
	return false
}

func hasAnyRole(have, want []string) bool {
	for _, w := range want {
		if slices.Contains(have, w) {
			return true
		}
	}
	return false
}
