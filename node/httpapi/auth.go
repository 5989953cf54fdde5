package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/store"
)

func unauthorized(w http.ResponseWriter, detail string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="scafo"`)
	writeError(w, http.StatusUnauthorized, "unauthorized", detail)
}

// reject answers 401 to a request without a valid credential, cheaply: the log line
// is rate-limited per source (rejectRequest), and an unread body is not waited for
// (cutBody).
func (s *API) reject(w http.ResponseWriter, r *http.Request, msg, detail string) {
	s.rejectRequest(r, msg)
	cutBody(w, r)
	unauthorized(w, detail)
}

// requireIngress admits the ingress token (and the admin token, which can do anything).
func (s *API) requireIngress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r.Header.Get("Authorization"))
		if tok == "" {
			s.reject(w, r, "rejected ingress request: no bearer token", "missing bearer token")
			return
		}
		if !s.isIngressToken(tok) && !s.isAdminToken(tok) {
			s.reject(w, r, "rejected ingress request: bad token", "invalid token")
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

// The negative cache of application tokens: a rejected token is refused again without a
// store read for badTokenTTL, so a flood of one bad token reads the store about once a
// minute. A token's secret is random and its id never reused, so a rejection stays
// right; the TTL only bounds the damage of a store that briefly answered "not found"
// for tokens that exist (a bucket being restored).
const (
	badTokenCacheSize = 1024
	badTokenTTL       = time.Minute
)

// plausibleAppToken reports whether tok has the shape of an application token, as
// IssueToken mints them: "scafo_" + 16 lowercase hex (the id) + "_" + 64 lowercase hex
// (the secret). Only such a token is looked up in the store.
func plausibleAppToken(tok string) bool {
	const idLen, secretLen = 16, 64
	rest, ok := strings.CutPrefix(tok, "scafo_")
	if !ok || len(rest) != idLen+1+secretLen || rest[idLen] != '_' {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if i != idLen && !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// authenticate admits the admin token and application tokens
// ("scafo_<id>_<secret>", looked up in the store on every request so a revocation
// takes effect at once) and records who is calling. Authorization is the write
// domain's (per operation) and adminOnly's. A rejection is cheap: a token not shaped
// like an application token, or one rejected lately (badTokens), is refused without a
// store read, and so is one whose MAC does not verify (fleetwrite.CheckToken); rejections
// are logged at most once per source per interval.
func (s *API) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r.Header.Get("Authorization"))
		if tok == "" {
			s.reject(w, r, "rejected request: no bearer token", "missing bearer token")
			return
		}
		var a fleetwrite.Actor
		switch {
		case s.isAdminToken(tok):
			a.Admin = true
		case !plausibleAppToken(tok):
			s.reject(w, r, "rejected request: bad token", "invalid token")
			return
		default:
			hash := fleetwrite.HashToken(tok)
			if s.badTokens.Contains(hash) {
				s.reject(w, r, "rejected request: bad token", "invalid token")
				return
			}
			// Every lookup is a store read. A token the fleet issued carries a MAC of
			// the fleet's key (fleetwrite.CheckToken): a made-up one is refused here,
			// without a store read and without spending any budget. One that verifies
			// has a budget of its own, keyed by the whole token's hash (the id alone is
			// public: audit rows, URLs), so a tenant cannot make the node read the store
			// at the rate it sends (reads are not writes.rate's, and writes past it are
			// refused only after the lookup), and nobody else can spend it. While no
			// key is usable (the store unreachable, the key object corrupt) no token
			// can be told from a made-up one: 503, retry.
			switch s.writer.CheckToken(r.Context(), tok) {
			case fleetwrite.TokenForged:
				s.reject(w, r, "rejected request: bad token", "invalid token")
				return
			case fleetwrite.TokenNoKey:
				cutBody(w, r)
				s.writeDomainError(w, errNoTokenKey)
				return
			}
			if ok, retry := s.knownLookups.take(hash); !ok {
				s.rejectRequest(r, "rejected request: token lookup budget spent")
				cutBody(w, r)
				w.Header().Set("Retry-After", strconv.Itoa(max(1, int(retry.Seconds()+0.999))))
				writeError(w, http.StatusTooManyRequests, "too many token lookups",
					"a token is checked against the store at a bounded rate; retry")
				return
			}
			rec, err := s.writer.LookupToken(r.Context(), tok)
			if errors.Is(err, store.ErrUnavailable) {
				s.writeDomainError(w, err)
				return
			}
			if err != nil {
				if errors.Is(err, fleetwrite.ErrBadToken) {
					s.badTokens.Add(hash)
				}
				s.reject(w, r, "rejected request: bad token", "invalid token")
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

// sourceOf is the per-source key of r's remote address (sourceKey: the address
// without its port, an IPv6 one's /64).
func sourceOf(r *http.Request) string { return sourceKey(hostOf(r.RemoteAddr)) }

// errNoTokenKey: no token MAC key is usable, so no application token can be told from
// a made-up one (whose lookups would be unbounded store reads): 503, retry.
var errNoTokenKey = fmt.Errorf("the fleet's token key (store object %s) cannot be read or is corrupt; application tokens are refused until it is: %w", fleetwrite.TokenMACKey, store.ErrUnavailable)

// KnownTokenRate/Burst: the requests one token the fleet issued may make (each is a
// store read of its record), whatever they are; raised to 4×writes.rate and
// 2×writes.burst when those are larger (its writes are among its requests).
const (
	KnownTokenRate  = 20
	KnownTokenBurst = 40
)

// isIngressToken accepts the ingress token and, during a rotation, the previous ones.
func (s *API) isIngressToken(tok string) bool {
	return tokenEqual(tok, s.cfg.IngressToken) || anyTokenEqual(tok, s.cfg.IngressPrevious)
}

// isAdminToken accepts the admin token and, during a rotation, the previous ones.
func (s *API) isAdminToken(tok string) bool {
	return tokenEqual(tok, s.cfg.AdminToken) || anyTokenEqual(tok, s.cfg.AdminPrevious)
}

func anyTokenEqual(tok string, accepted []string) bool {
	ok := false
	for _, a := range accepted {
		ok = tokenEqual(tok, a) || ok // every one compared: no early exit to time
	}
	return ok
}
