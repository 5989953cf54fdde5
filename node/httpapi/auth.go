package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// authenticator is the API's credentials check: the node's own tokens (the ingress,
// admin and read-only tokens) and application tokens (looked up in the store, on a
// budget per token, behind the fleet's MAC). Its middleware guard the route groups
// (routes.go); readOnly is the route table's readOnly attribute of a routed request.
type authenticator struct {
	tokens    *nodeTokens
	readOnly  func(*http.Request) bool
	writer    *fleetwrite.Writer
	refused   *refusals
	log       *slog.Logger
	badTokens *expiringSet // hashes of recently rejected application tokens
	// lookups is the lookup budget of each token the fleet issued (keyed by its hash).
	lookups *writeLimiter
	// readOnlyReads is the read-only token's budget on the admin group's routes
	// (applications, claims, instances, the audit log: lists and reads of the store).
	readOnlyReads *writeLimiter
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

// KnownTokenRate/Burst: the requests one token the fleet issued may make (each is a
// store read of its record), whatever they are; raised to 4×writes.rate and
// 2×writes.burst when those are larger (its writes are among its requests).
const (
	KnownTokenRate  = 20
	KnownTokenBurst = 40
)

// ReadOnlyReadRate/Burst: the requests the read-only token (every node's, current and
// previous: one budget) may make on this node of the routes that read the store
// (applications, claims, the audit log, instances): unbounded, a leaked read-only token
// (the status page's, kept in a browser) could spend a bucket's request budget at any
// rate (a list of applications is a LIST and a GET of each one changed since the last:
// fleetwrite.Writer.Apps). The status page reads them every 30 s; a script may list
// them every second. One budget for every holder of the token: a holder can keep the
// others' pages on 429 (a shared credential; rotate it: docs/operating.md).
const (
	ReadOnlyReadRate  = 1
	ReadOnlyReadBurst = 20
)

// errNoTokenKey: no token MAC key is usable, so no application token can be told from
// a made-up one (whose lookups would be unbounded store reads): 503, retry.
var errNoTokenKey = fmt.Errorf("the fleet's token key (store object %s) cannot be read or is corrupt; application tokens are refused until it is: %w", fleetwrite.TokenMACKey, store.ErrUnavailable)

func newAuthenticator(cfg Config, tokens *nodeTokens, writer *fleetwrite.Writer, refused *refusals, log *slog.Logger, readOnly func(*http.Request) bool) *authenticator {
	return &authenticator{
		tokens: tokens, readOnly: readOnly, writer: writer, refused: refused, log: log,
		badTokens: newExpiringSet(badTokenCacheSize, badTokenTTL, time.Now),
		lookups:   newWriteLimiter(max(KnownTokenRate, 4*cfg.WriteRate), max(KnownTokenBurst, 2*cfg.WriteBurst)),

		readOnlyReads: newWriteLimiter(ReadOnlyReadRate, ReadOnlyReadBurst),
	}
}

// requireIngress admits the ingress token (and the admin token, which can do anything),
// and the read-only token on the routes it may read (the poll handler keeps it from
// being an ingress).
func (a *authenticator) requireIngress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r.Header.Get("Authorization"))
		switch {
		case tok == "":
			a.refused.unauthorized(w, r, "rejected ingress request: no bearer token", "missing bearer token")
		case a.tokens.isIngress(tok) || a.tokens.isAdmin(tok):
			next.ServeHTTP(w, r)
		case a.tokens.isReadOnly(tok):
			if !a.readOnly(r) {
				a.refuseRole(w, r, roleReadOnly)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), readOnlyKey{}, true)))
		default:
			a.refused.unauthorized(w, r, "rejected ingress request: bad token", "invalid token")
		}
	})
}

// The node's own roles other than the admin's, as a 403 names them.
const (
	roleIngress  = "ingress"
	roleReadOnly = "read-only"
)

// roleReads says what each of them may read, for its 403s.
var roleReads = map[string]string{
	roleIngress: "the ingress token reads " + api.PathStatus + " and the routing endpoints and writes " + api.PathStorage +
		"; this endpoint needs the admin token (the read-only token reads it when it is a GET of status, applications, claims, instances or audit)",
	roleReadOnly: "the read-only token reads " + api.PathStatus + ", " + api.PathIngress + api.FormatRoutes +
		", applications, claims, instances and the audit log, and changes nothing; this endpoint needs another credential",
}

// refuseRole answers 403 naming role (one of the node's own, a known credential that
// may not make r): its body says what the role reads. A read is refused without a log
// line (the status page with the ingress token asks for the audit log every 30 s); a
// write is logged, rate-limited. Both are counted.
func (a *authenticator) refuseRole(w http.ResponseWriter, r *http.Request, role string) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		a.refused.count(RefusedToken)
	} else {
		a.refused.request(r, "rejected request: the "+role+" token on "+r.Method+" "+r.URL.Path)
	}
	cutBody(w, r)
	writeJSON(w, http.StatusForbidden, api.Error{Error: "forbidden", Detail: roleReads[role], Role: role})
}

type readOnlyKey struct{}

// isReadOnlyRequest reports whether r carries the read-only token (set by the guards,
// on the routes it may read).
func isReadOnlyRequest(r *http.Request) bool {
	ro, _ := r.Context().Value(readOnlyKey{}).(bool)
	return ro
}

// requireStorageToken admits the ingress token only. The admin token is refused (403):
// the namespace holds the fleet's private keys, which no administrative task needs, and
// the admin token travels further (CLI, CI, the public apex). Application tokens are
// refused like any unknown token, without a store read.
func (a *authenticator) requireStorageToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r.Header.Get("Authorization"))
		switch {
		case tok == "":
			a.refused.unauthorized(w, r, "rejected storage request: no bearer token", "missing bearer token")
		case a.tokens.isIngress(tok):
			next.ServeHTTP(w, r)
		case a.tokens.isAdmin(tok):
			a.refused.request(r, "rejected storage request: admin token")
			cutBody(w, r)
			writeError(w, http.StatusForbidden, "forbidden",
				api.PathStorage+" takes the ingress token only: it holds the fleet's private keys, which the admin token does not need")
		case a.tokens.isReadOnly(tok):
			a.refused.request(r, "rejected storage request: the read-only token")
			cutBody(w, r)
			writeJSON(w, http.StatusForbidden, api.Error{Error: "forbidden", Role: roleReadOnly,
				Detail: api.PathStorage + " takes the ingress token only: it holds the fleet's private keys; " + roleReads[roleReadOnly]})
		default:
			a.refused.unauthorized(w, r, "rejected storage request: bad token", "invalid token")
		}
	})
}

type actorKey struct{}

// actorOf is who made a request (set by authenticate).
func actorOf(r *http.Request) fleetwrite.Actor {
	a, _ := r.Context().Value(actorKey{}).(fleetwrite.Actor)
	return a
}

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
func (a *authenticator) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r.Header.Get("Authorization"))
		if tok == "" {
			a.refused.unauthorized(w, r, "rejected request: no bearer token", "missing bearer token")
			return
		}
		var who fleetwrite.Actor
		switch {
		case a.tokens.isAdmin(tok):
			who.Admin = true
		case a.tokens.isReadOnly(tok):
			if !a.readOnly(r) {
				a.refuseRole(w, r, roleReadOnly)
				return
			}
			if ok, retry := a.readOnlyReads.take(roleReadOnly); !ok {
				a.refused.count(RefusedReadRate)
				cutBody(w, r)
				secs := fleetwrite.RetrySeconds(retry)
				w.Header().Set("Retry-After", strconv.Itoa(secs))
				writeError(w, http.StatusTooManyRequests, "too many reads",
					fmt.Sprintf("the read-only token reads applications, claims, instances and the audit log on this node at most %d a second (%d at once); retry after %ds",
						ReadOnlyReadRate, ReadOnlyReadBurst, secs))
				return
			}
			// No actor: adminOnly lets it through on the routes it may read, the write
			// domain never sees it.
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), readOnlyKey{}, true)))
			return
		case a.tokens.isIngress(tok):
			// A known credential, not an attacker's guess: 403 naming its role, and no
			// log line for a read (the status page with the ingress token).
			a.refuseRole(w, r, roleIngress)
			return
		case !plausibleAppToken(tok):
			a.refused.unauthorized(w, r, "rejected request: bad token", "invalid token")
			return
		default:
			rec, ok := a.appToken(w, r, tok)
			if !ok {
				return
			}
			who.Token = rec
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), actorKey{}, who)))
	})
}

// appToken checks an application token (shaped like one); ok false after it answered.
func (a *authenticator) appToken(w http.ResponseWriter, r *http.Request, tok string) (rec fleet.TokenRecord, ok bool) {
	hash := fleetwrite.HashToken(tok)
	if a.badTokens.Contains(hash) {
		a.refused.unauthorized(w, r, "rejected request: bad token", "invalid token")
		return rec, false
	}
	// Every lookup is a store read. A token the fleet issued carries a MAC of the
	// fleet's key (fleetwrite.CheckToken): a made-up one is refused here, without a
	// store read and without spending any budget. One that verifies has a budget of its
	// own, keyed by the whole token's hash (the id alone is public: audit rows, URLs),
	// so a tenant cannot make the node read the store at the rate it sends (reads are
	// not writes.rate's, and writes past it are refused only after the lookup), and
	// nobody else can spend it. While no key is usable (the store unreachable, the key
	// object corrupt) no token can be told from a made-up one: 503, retry.
	switch a.writer.CheckToken(r.Context(), tok) {
	case fleetwrite.TokenForged:
		a.refused.unauthorized(w, r, "rejected request: bad token", "invalid token")
		return rec, false
	case fleetwrite.TokenNoKey:
		cutBody(w, r)
		writeDomainError(w, a.log, errNoTokenKey)
		return rec, false
	}
	if ok, retry := a.lookups.take(hash); !ok {
		a.refused.request(r, "rejected request: token lookup budget spent")
		cutBody(w, r)
		w.Header().Set("Retry-After", strconv.Itoa(fleetwrite.RetrySeconds(retry)))
		writeError(w, http.StatusTooManyRequests, "too many token lookups",
			"a token is checked against the store at a bounded rate; retry")
		return rec, false
	}
	rec, err := a.writer.LookupToken(r.Context(), tok)
	if errors.Is(err, store.ErrUnavailable) {
		writeDomainError(w, a.log, err)
		return rec, false
	}
	if err != nil {
		if errors.Is(err, fleetwrite.ErrBadToken) {
			a.badTokens.Add(hash)
		}
		a.refused.unauthorized(w, r, "rejected request: bad token", "invalid token")
		return rec, false
	}
	return rec, true
}

// adminOnly refuses application tokens; the read-only token reached it only on a route
// it may read (authenticate).
func adminOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !actorOf(r).Admin && !isReadOnlyRequest(r) {
			writeError(w, http.StatusForbidden, "forbidden", "this endpoint needs the admin token; application tokens act only on their own application's paths and instances")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sourceOf is the per-source key of r's remote address (sourceKey: the address
// without its port, an IPv6 one's /64).
func sourceOf(r *http.Request) string { return sourceKey(hostOf(r.RemoteAddr)) }
