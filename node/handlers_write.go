package node

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// The write API: each handler decodes, calls one operation of the write domain
// (package fleetwrite) with the caller, and maps its error with writeDomainError.

// maxBody bounds every request body.
const maxBody = 2 << 20

// mountWrite registers the write API. Admin-only routes are one group.
func (s *Server) mountWrite(r chi.Router) {
	r.Group(func(r chi.Router) {
		r.Use(s.refuseWritesToAForeignStore)
		r.Use(s.authenticate)
		r.Use(s.limitWrites)
		r.Get("/v1/apps/{app}/domains/{host}/paths", s.handleGetPaths)
		r.Put("/v1/apps/{app}/domains/{host}/paths", s.handlePutPaths)
		r.Post("/v1/node/instances/{app}", s.handleAllocateInstance)
		r.Put("/v1/node/instances/{app}", s.handlePutInstance)
		r.Delete("/v1/node/instances/{app}", s.handleDeleteInstance)
		r.Group(func(r chi.Router) {
			r.Use(adminOnly)
			r.Get("/v1/apps", s.handleListApps)
			r.Get("/v1/apps/{app}", s.handleGetApp)
			r.Put("/v1/apps/{app}", s.handlePutApp)
			r.Delete("/v1/apps/{app}", s.handleDeleteApp)
			r.Get("/v1/apps/{app}/domains/{host}", s.handleGetClaim)
			r.Put("/v1/apps/{app}/domains/{host}", s.handlePutClaim)
			r.Delete("/v1/apps/{app}/domains/{host}", s.handleDeleteClaim)
			r.Get("/v1/node/instances", s.handleListInstances)
			r.Post("/v1/tokens", s.handleCreateToken)
			r.Delete("/v1/tokens/{id}", s.handleDeleteToken)
			r.Get("/v1/audit", s.handleAudit)
		})
	})
}

// refuseWritesToAForeignStore answers 503 to every write-API request while the store
// does not look like the one this node served (store.Identity.Foreign): a write there
// would land in a store no node publishes from.
func (s *Server) refuseWritesToAForeignStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.identity.Foreign() {
			w.Header().Set("Retry-After", "30")
			writeError(w, http.StatusServiceUnavailable, "store unavailable",
				"the store is not the one this node served ("+s.identity.ForeignReason()+"); nothing was written; "+
					"if this store is meant to be the fleet's, run `scafo-node store adopt` on this node: it then accepts the store as it is")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ---- decoding and errors ----

// decodeStrict decodes a JSON body into v: bounded size, unknown fields refused, one
// value only.
func decodeStrict(r *http.Request, v any) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	return jsonx.DecodeStrict(body, v)
}

// readBody reads a request body of at most maxBody bytes.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if len(body) > maxBody {
		return nil, fmt.Errorf("body larger than %d bytes", maxBody)
	}
	return body, nil
}

func badRequest(w http.ResponseWriter, what string, err error) {
	writeError(w, http.StatusBadRequest, what, err.Error())
}

// writeDomainError maps an error of the write domain (or the store under it) to its
// one status.
func (s *Server) writeDomainError(w http.ResponseWriter, err error) {
	var (
		inv  *fleetwrite.ErrInvalid
		conf *fleetwrite.ErrConflict
		forb *fleetwrite.ErrForbidden
	)
	switch {
	case errors.As(err, &inv):
		writeError(w, http.StatusBadRequest, inv.What, inv.Error())
	case errors.As(err, &conf):
		writeError(w, http.StatusConflict, conf.What, conf.Detail)
	case errors.As(err, &forb):
		writeError(w, http.StatusForbidden, forb.What, forb.Detail)
	case errors.Is(err, fleetwrite.ErrPrecondition), errors.Is(err, store.ErrPreconditionFailed):
		writeError(w, http.StatusPreconditionFailed, "precondition failed", err.Error()+"; re-read it and retry")
	case errors.Is(err, fleetwrite.ErrPortTaken):
		writeError(w, http.StatusConflict, "port taken", err.Error())
	case errors.Is(err, fleetwrite.ErrNoInstance):
		writeError(w, http.StatusNotFound, "no instance", err.Error()+" (POST allocates one)")
	case errors.Is(err, fleetwrite.ErrNoFreePort):
		writeError(w, http.StatusServiceUnavailable, "no free port", err.Error())
	case errors.Is(err, fleetwrite.ErrPortOutOfRange):
		writeError(w, http.StatusBadRequest, "invalid port", err.Error())
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "not found", err.Error())
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrForeign):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "store unavailable", err.Error()+": the store is unreachable; nothing was written")
	default:
		s.log.Error("write failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// writeObject answers with an object and its ETag.
func writeObject(w http.ResponseWriter, code int, etag string, v any) {
	if etag != "" {
		w.Header().Set("ETag", quoteETag(etag))
	}
	writeJSON(w, code, v)
}

// The store's etags are opaque tokens; on the wire they are quoted strong ETags.
func quoteETag(e string) string {
	if strings.HasPrefix(e, `"`) {
		return e
	}
	return `"` + e + `"`
}

// ifMatch returns the If-Match header as sent ("" when absent): "*" or a list of entity
// tags, which the write domain compares with the object's etag (fleetwrite.sameETag:
// "*" matches any current representation, a weak tag never matches).
func ifMatch(r *http.Request) string {
	return strings.TrimSpace(r.Header.Get("If-Match"))
}

// writeConditionalError is writeDomainError for a write that may carry If-Match: when
// the object it names does not exist, no If-Match can match ("*" included), so the
// answer is 412, not 404 (RFC 9110 §13.1.1).
func (s *Server) writeConditionalError(w http.ResponseWriter, r *http.Request, err error) {
	if ifMatch(r) != "" && errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusPreconditionFailed, "precondition failed",
			"If-Match, but "+err.Error()+"; re-read it and retry")
		return
	}
	s.writeDomainError(w, err)
}

func created(c bool) int {
	if c {
		return http.StatusCreated
	}
	return http.StatusOK
}

// ---- applications ----

func (s *Server) handleListApps(w http.ResponseWriter, r *http.Request) {
	apps, err := s.writer.Apps(r.Context())
	if err != nil {
		s.writeDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"apps": apps})
}

func (s *Server) handleGetApp(w http.ResponseWriter, r *http.Request) {
	a, etag, err := s.writer.App(r.Context(), chi.URLParam(r, "app"))
	if err != nil {
		s.writeDomainError(w, err)
		return
	}
	writeObject(w, http.StatusOK, etag, a)
}

func (s *Server) handlePutApp(w http.ResponseWriter, r *http.Request) {
	app := chi.URLParam(r, "app")
	if err := fleetwrite.ValidateAppName(app); err != nil {
		s.writeDomainError(w, err)
		return
	}
	var a fleet.App
	if err := decodeStrict(r, &a); err != nil {
		badRequest(w, "invalid body", err)
		return
	}
	a, etag, isNew, err := s.writer.PutApp(r.Context(), actorOf(r), app, a, ifMatch(r))
	if err != nil {
		s.writeConditionalError(w, r, err)
		return
	}
	writeObject(w, created(isNew), etag, a)
}

func (s *Server) handleDeleteApp(w http.ResponseWriter, r *http.Request) {
	app := chi.URLParam(r, "app")
	if err := s.writer.DeleteApp(r.Context(), actorOf(r), app, ifMatch(r)); err != nil {
		s.writeConditionalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": app})
}

// ---- claims ----

// claimParams validates the {app} and {host} of a claim URL.
func (s *Server) claimParams(w http.ResponseWriter, r *http.Request) (app, host string, ok bool) {
	app = chi.URLParam(r, "app")
	err := fleetwrite.ValidateAppName(app)
	if err == nil {
		host, err = fleetwrite.CanonicalHost(chi.URLParam(r, "host"))
	}
	if err != nil {
		s.writeDomainError(w, err)
		return "", "", false
	}
	return app, host, true
}

func (s *Server) handleGetClaim(w http.ResponseWriter, r *http.Request) {
	app, host, ok := s.claimParams(w, r)
	if !ok {
		return
	}
	c, etag, err := s.writer.ClaimOf(r.Context(), app, host)
	if err != nil {
		s.writeDomainError(w, err)
		return
	}
	writeObject(w, http.StatusOK, etag, c)
}

func (s *Server) handlePutClaim(w http.ResponseWriter, r *http.Request) {
	app, host, ok := s.claimParams(w, r)
	if !ok {
		return
	}
	// A claim takes an empty body or {}: paths are published through .../paths.
	raw, err := readBody(r)
	if err != nil {
		badRequest(w, "invalid body", err)
		return
	}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := jsonx.DecodeStrict(raw, &struct{}{}); err != nil {
			badRequest(w, "invalid body", fmt.Errorf("a claim takes no fields (publish paths through .../paths): %w", err))
			return
		}
	}
	c, etag, isNew, err := s.writer.Claim(r.Context(), actorOf(r), app, host)
	if err != nil {
		s.writeDomainError(w, err)
		return
	}
	writeObject(w, created(isNew), etag, c)
}

func (s *Server) handleDeleteClaim(w http.ResponseWriter, r *http.Request) {
	app, host, ok := s.claimParams(w, r)
	if !ok {
		return
	}
	if err := s.writer.Release(r.Context(), actorOf(r), app, host, ifMatch(r)); err != nil {
		s.writeConditionalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"released": host})
}

// ---- the path-map door ----

// pathsBody is the only accepted shape: {"paths": {...}}. Paths is a pointer so an
// absent or misspelled field is told apart from {"paths": {}}, which clears: a typo
// must never become a silent clear of every flip.
type pathsBody struct {
	Paths *map[string]string `json:"paths"`
}

type pathsAnswer struct {
	Host     string            `json:"host"`
	Account  string            `json:"account"`
	App      string            `json:"app"`
	Paths    map[string]string `json:"paths"`
	Warnings []string          `json:"warnings,omitempty"`
}

func answerPaths(c fleet.Claim, warnings []string) pathsAnswer {
	paths := c.Paths
	if paths == nil {
		paths = map[string]string{}
	}
	return pathsAnswer{Host: c.Host, Account: c.Account, App: c.App, Paths: paths, Warnings: warnings}
}

// refusePathsFirst answers a request to the path-map door that is malformed (answer
// writes the 400): a caller the write domain refuses on {app} gets that refusal
// instead, so a refusal (an application token on the control-plane application, or on
// another application) reads the same whatever the request's host or body. The admin
// is never refused; a well-formed request is authorized by the operation itself.
func (s *Server) refusePathsFirst(w http.ResponseWriter, r *http.Request, answer func()) {
	if who := actorOf(r); !who.Admin {
		app := chi.URLParam(r, "app")
		if fleetwrite.ValidateAppName(app) == nil {
			if err := s.writer.AuthorizePaths(r.Context(), who, app); err != nil {
				s.writeDomainError(w, err)
				return
			}
		}
	}
	answer()
}

// pathsParams is claimParams for the path-map door (refusePathsFirst).
func (s *Server) pathsParams(w http.ResponseWriter, r *http.Request) (app, host string, ok bool) {
	app = chi.URLParam(r, "app")
	err := fleetwrite.ValidateAppName(app)
	if err == nil {
		host, err = fleetwrite.CanonicalHost(chi.URLParam(r, "host"))
	}
	if err != nil {
		s.refusePathsFirst(w, r, func() { s.writeDomainError(w, err) })
		return "", "", false
	}
	return app, host, true
}

func (s *Server) handleGetPaths(w http.ResponseWriter, r *http.Request) {
	app, host, ok := s.pathsParams(w, r)
	if !ok {
		return
	}
	c, etag, err := s.writer.Paths(r.Context(), actorOf(r), app, host)
	if err != nil {
		s.writeDomainError(w, err)
		return
	}
	writeObject(w, http.StatusOK, etag, answerPaths(c, nil))
}

func (s *Server) handlePutPaths(w http.ResponseWriter, r *http.Request) {
	var body pathsBody
	if err := decodeStrict(r, &body); err != nil {
		s.refusePathsFirst(w, r, func() {
			badRequest(w, "invalid body", fmt.Errorf(`%w (want {"paths": {"<prefix>": "<host>"}})`, err))
		})
		return
	}
	if body.Paths == nil {
		s.refusePathsFirst(w, r, func() {
			writeError(w, http.StatusBadRequest, "invalid body", `field "paths" is required: {"paths": {}} clears the map`)
		})
		return
	}
	if _, err := fleetwrite.ValidatePaths(*body.Paths); err != nil {
		s.refusePathsFirst(w, r, func() { s.writeDomainError(w, err) })
		return
	}
	app, host, ok := s.pathsParams(w, r)
	if !ok {
		return
	}
	c, etag, err := s.writer.PublishPaths(r.Context(), actorOf(r), app, host, *body.Paths, ifMatch(r))
	if err != nil {
		s.writeConditionalError(w, r, err)
		return
	}
	writeObject(w, http.StatusOK, etag, answerPaths(c, s.pathWarnings(c)))
}

// ---- instances ----

func (s *Server) handleListInstances(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"instances": s.writer.Instances()})
}

func (s *Server) handleAllocateInstance(w http.ResponseWriter, r *http.Request) {
	inst, isNew, err := s.writer.AllocateInstance(r.Context(), actorOf(r), chi.URLParam(r, "app"))
	if err != nil {
		s.writeDomainError(w, err)
		return
	}
	writeJSON(w, created(isNew), inst)
}

func (s *Server) handlePutInstance(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Port  *int  `json:"port"`
		Ready *bool `json:"ready"`
	}
	if err := decodeStrict(r, &body); err != nil {
		badRequest(w, "invalid body", err)
		return
	}
	if body.Ready == nil {
		writeError(w, http.StatusBadRequest, "invalid body", `field "ready" is required`)
		return
	}
	inst, err := s.writer.SetInstance(r.Context(), actorOf(r), chi.URLParam(r, "app"), body.Port, *body.Ready)
	if err != nil {
		s.writeDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, inst)
}

func (s *Server) handleDeleteInstance(w http.ResponseWriter, r *http.Request) {
	app := chi.URLParam(r, "app")
	if err := s.writer.ReleaseInstance(r.Context(), actorOf(r), app); err != nil {
		s.writeDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"released": app, "quarantine": time.Duration(s.cfg.Ports.Quarantine).String()})
}

// ---- tokens ----

func (s *Server) handleCreateToken(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Account string   `json:"account"`
		App     string   `json:"app"`
		Roles   []string `json:"roles"`
	}
	if err := decodeStrict(r, &body); err != nil {
		badRequest(w, "invalid body", err)
		return
	}
	tok, err := s.writer.IssueToken(r.Context(), actorOf(r), body.Account, body.App, body.Roles)
	if err != nil {
		s.writeDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, tok)
}

func (s *Server) handleDeleteToken(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if err := s.writer.RevokeToken(r.Context(), actorOf(r), id); err != nil {
		s.writeDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"revoked": id})
}

// ---- audit ----

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			n = -1
		}
		limit = n
	}
	recs, err := s.writer.Audit(r.Context(), limit)
	if err != nil {
		s.writeDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": recs})
}
