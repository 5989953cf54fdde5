package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// maxBody bounds every request body.
const maxBody = 2 << 20

// maxPrefixes is the cap on one host's path map (DESIGN §3).
const maxPrefixes = 10000

// prefixAudit is where audit records live in the store.
const prefixAudit = "audit/"

// mountWriteRoutes registers the write API.
func (s *Server) mountWriteRoutes(r chi.Router) {
	r.Group(func(r chi.Router) {
		r.Use(s.refuseWritesToAForeignStore)
		r.Use(s.authenticate)
		r.Get("/v1/apps", s.adminOnly(s.handleListApps))
		r.Get("/v1/apps/{app}", s.adminOnly(s.handleGetApp))
		r.Put("/v1/apps/{app}", s.adminOnly(s.handlePutApp))
		r.Delete("/v1/apps/{app}", s.adminOnly(s.handleDeleteApp))
		r.Get("/v1/apps/{app}/domains/{host}", s.adminOnly(s.handleGetClaim))
		r.Put("/v1/apps/{app}/domains/{host}", s.adminOnly(s.handlePutClaim))
		r.Delete("/v1/apps/{app}/domains/{host}", s.adminOnly(s.handleDeleteClaim))
		r.Get("/v1/apps/{app}/domains/{host}/paths", s.handleGetPaths)
		r.Put("/v1/apps/{app}/domains/{host}/paths", s.handlePutPaths)
		r.Post("/v1/node/instances/{app}", s.handleAllocateInstance)
		r.Put("/v1/node/instances/{app}", s.handlePutInstance)
		r.Delete("/v1/node/instances/{app}", s.handleDeleteInstance)
		r.Get("/v1/node/instances", s.adminOnly(s.handleListInstances))
		r.Post("/v1/tokens", s.adminOnly(s.handleCreateToken))
		r.Delete("/v1/tokens/{id}", s.adminOnly(s.handleDeleteToken))
		r.Get("/v1/audit", s.adminOnly(s.handleAudit))
	})
}

// refuseWritesToAForeignStore answers 503 to every write-API request while the store
// does not look like the one this node served (see reconciler.identityLost): a write
// there would land in a store no node publishes from.
func (s *Server) refuseWritesToAForeignStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.rec.identityLost.Load() {
			w.Header().Set("Retry-After", "30")
			writeError(w, http.StatusServiceUnavailable, "store unavailable",
				"the store's serial vanished, went backwards or changed epoch (wiped or replaced?); nothing was written; restart the node to adopt the store as it is")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ---- decoding and errors ----

// decodeStrict decodes a JSON body into v: bounded size, unknown fields refused, one
// value only. The error names the offending field where encoding/json knows it.
func decodeStrict(r *http.Request, v any) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeStrictBytes(body, v)
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

// decodeStrictBytes decodes one JSON value into v, unknown fields refused.
func decodeStrictBytes(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("field %q: want %s, got %s", te.Field, te.Type, te.Value)
		}
		if errors.Is(err, io.EOF) {
			return errors.New("empty body: want a JSON object")
		}
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

func badRequest(w http.ResponseWriter, what string, err error) {
	writeError(w, http.StatusBadRequest, what, err.Error())
}

// storeError answers a store failure: 503 when the store is unreachable (nothing was
// written), 412 on a lost condition, 500 otherwise.
func (s *Server) storeError(w http.ResponseWriter, doing string, err error) {
	switch {
	case errors.Is(err, store.ErrUnavailable):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "store unavailable", doing+": the store is unreachable; nothing was written")
	case errors.Is(err, store.ErrPreconditionFailed):
		writeError(w, http.StatusPreconditionFailed, "precondition failed", doing+": the object changed; re-read it and retry")
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "not found", doing)
	default:
		s.log.Error("store error", "doing", doing, "err", err)
		writeError(w, http.StatusInternalServerError, "internal", doing+": "+err.Error())
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

// ifMatch returns the unquoted If-Match etag ("" when absent).
func ifMatch(r *http.Request) string {
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	return strings.Trim(strings.TrimPrefix(v, "W/"), `"`)
}

func sameETag(storeETag, clientETag string) bool {
	return strings.Trim(storeETag, `"`) == clientETag
}

// ---- applications ----

func (s *Server) appParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	app := chi.URLParam(r, "app")
	if err := routing.ValidateLabel("app", app); err != nil {
		badRequest(w, "invalid app", err)
		return "", false
	}
	return app, true
}

func (s *Server) loadApp(ctx context.Context, app string) (fleet.App, string, error) {
	return loadJSON[fleet.App](ctx, s.st, fleet.PrefixApps+app+".json")
}

// loadJSON reads one stored object and decodes it (unknown fields tolerated on read).
func loadJSON[T any](ctx context.Context, st store.Store, key string) (T, string, error) {
	var v T
	obj, err := st.Get(ctx, key)
	if err != nil {
		return v, "", err
	}
	if err := json.Unmarshal(obj.Value, &v); err != nil {
		return v, "", fmt.Errorf("decoding %s: %w", key, err)
	}
	return v, obj.ETag, nil
}

func (s *Server) handleListApps(w http.ResponseWriter, r *http.Request) {
	entries, err := s.st.List(r.Context(), fleet.PrefixApps)
	if err != nil {
		s.storeError(w, "listing applications", err)
		return
	}
	apps := []fleet.App{}
	for _, e := range entries {
		a, _, err := s.loadApp(r.Context(), strings.TrimSuffix(strings.TrimPrefix(e.Key, fleet.PrefixApps), ".json"))
		if err == nil {
			apps = append(apps, a)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"apps": apps})
}

func (s *Server) handleGetApp(w http.ResponseWriter, r *http.Request) {
	app, ok := s.appParam(w, r)
	if !ok {
		return
	}
	a, etag, err := s.loadApp(r.Context(), app)
	if err != nil {
		s.storeError(w, "reading application "+app, err)
		return
	}
	writeObject(w, http.StatusOK, etag, a)
}

func validateApp(a *fleet.App) error {
	if err := routing.ValidateLabel("account", a.Account); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, n := range a.Placement {
		if err := routing.ValidateLabel(fmt.Sprintf("placement[%d]", i), n); err != nil {
			return err
		}
		if seen[n] {
			return fmt.Errorf("placement[%d] %q: listed twice", i, n)
		}
		seen[n] = true
	}
	if a.Health != nil {
		if err := routing.ValidateHealthPath("health.path", a.Health.Path); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) handlePutApp(w http.ResponseWriter, r *http.Request) {
	app, ok := s.appParam(w, r)
	if !ok {
		return
	}
	var a fleet.App
	if err := decodeStrict(r, &a); err != nil {
		badRequest(w, "invalid body", err)
		return
	}
	if a.Name == "" {
		a.Name = app
	}
	if a.Name != app {
		writeError(w, http.StatusBadRequest, "invalid name", fmt.Sprintf("name %q does not match the URL's %q", a.Name, app))
		return
	}
	if a.Placement == nil {
		a.Placement = []string{}
	}
	if err := validateApp(&a); err != nil {
		badRequest(w, "invalid application", err)
		return
	}
	ctx := r.Context()
	body, _ := marshalObject(a)
	key := fleet.PrefixApps + app + ".json"
	cur, err := s.st.Get(ctx, key)
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.storeError(w, "reading application "+app, err)
		return
	}
	if m := ifMatch(r); m != "" && (!exists || !sameETag(cur.ETag, m)) {
		writeError(w, http.StatusPreconditionFailed, "precondition failed", "If-Match does not match the current application")
		return
	}
	if exists {
		var old fleet.App
		if json.Unmarshal(cur.Value, &old) == nil && old.Account != a.Account {
			writeError(w, http.StatusConflict, "account change refused",
				fmt.Sprintf("application %s belongs to account %q; delete and recreate it to move accounts", app, old.Account))
			return
		}
		if string(cur.Value) == string(body) {
			writeObject(w, http.StatusOK, cur.ETag, a) // no-op: no write, no serial bump
			return
		}
	}
	cond := store.Condition{IfNoneMatch: !exists, IfMatch: cur.ETag}
	etag, err := s.st.Put(ctx, key, body, cond)
	if err != nil {
		s.storeError(w, "writing application "+app, err)
		return
	}
	s.committed(ctx, r, auditRecord{Action: "app.put", Account: a.Account, App: app})
	code := http.StatusOK
	if !exists {
		code = http.StatusCreated
	}
	writeObject(w, code, etag, a)
}

func (s *Server) handleDeleteApp(w http.ResponseWriter, r *http.Request) {
	app, ok := s.appParam(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	a, etag, err := s.loadApp(ctx, app)
	if err != nil {
		s.storeError(w, "reading application "+app, err)
		return
	}
	if m := ifMatch(r); m != "" && !sameETag(etag, m) {
		writeError(w, http.StatusPreconditionFailed, "precondition failed", "If-Match does not match the current application")
		return
	}
	claims, err := s.claimsOf(ctx, app)
	if err != nil {
		s.storeError(w, "listing claims", err)
		return
	}
	if len(claims) > 0 {
		writeError(w, http.StatusConflict, "application holds domains",
			fmt.Sprintf("release %s first", strings.Join(claims, ", ")))
		return
	}
	if err := s.st.Delete(ctx, fleet.PrefixApps+app+".json", etag); err != nil {
		s.storeError(w, "deleting application "+app, err)
		return
	}
	s.committed(ctx, r, auditRecord{Action: "app.delete", Account: a.Account, App: app})
	writeJSON(w, http.StatusOK, map[string]string{"deleted": app})
}

func (s *Server) claimsOf(ctx context.Context, app string) ([]string, error) {
	entries, err := s.st.List(ctx, fleet.PrefixDomains)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		obj, err := s.st.Get(ctx, e.Key)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var c fleet.Claim
		if json.Unmarshal(obj.Value, &c) == nil && c.App == app {
			out = append(out, c.Host)
		}
	}
	return out, nil
}

// ---- claims ----

// claimParams validates the {app} and {host} of a claim URL.
func (s *Server) claimParams(w http.ResponseWriter, r *http.Request) (app, host string, ok bool) {
	if app, ok = s.appParam(w, r); !ok {
		return "", "", false
	}
	if host, ok = s.hostParam(w, r); !ok {
		return "", "", false
	}
	return app, host, true
}

// hostParam folds and validates the {host} of a claim URL.
func (s *Server) hostParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	raw := chi.URLParam(r, "host")
	host := routing.FoldHost(raw)
	if err := routing.ValidateCustomHost("host", host); err != nil {
		badRequest(w, "invalid host", err)
		return "", false
	}
	return host, true
}

// platformConflict says why host can never be claimed: it is, or is under, a platform
// domain's application namespace. The bare apex itself may be claimed.
func (s *Server) platformConflict(host string) string {
	bare := strings.TrimPrefix(host, "*.")
	for _, d := range s.cfg.Platform.Domains {
		if strings.HasSuffix(bare, "."+d) {
			if strings.HasPrefix(host, "*.") || strings.Count(strings.TrimSuffix(bare, "."+d), ".") == 0 {
				return fmt.Sprintf("%s is a platform host under %s: platform hosts are <app>.%s and are never claimed", host, d, d)
			}
			return fmt.Sprintf("%s is under the platform domain %s and cannot be claimed", host, d)
		}
		if host == "*."+d {
			return fmt.Sprintf("%s is a wildcard of the platform domain %s: platform domains never route by wildcard", host, d)
		}
	}
	return ""
}

func (s *Server) loadClaim(ctx context.Context, host string) (fleet.Claim, string, error) {
	return loadJSON[fleet.Claim](ctx, s.st, fleet.PrefixDomains+host+".json")
}

func (s *Server) handleGetClaim(w http.ResponseWriter, r *http.Request) {
	app, host, ok := s.claimParams(w, r)
	if !ok {
		return
	}
	c, etag, err := s.loadClaim(r.Context(), host)
	if err != nil {
		s.storeError(w, "reading claim "+host, err)
		return
	}
	if c.App != app {
		writeError(w, http.StatusNotFound, "not found", fmt.Sprintf("%s is not held by %s", host, app))
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
		if err := decodeStrictBytes(raw, &struct{}{}); err != nil {
			badRequest(w, "invalid body", fmt.Errorf("a claim takes no fields (publish paths through .../paths): %w", err))
			return
		}
	}
	if why := s.platformConflict(host); why != "" {
		writeError(w, http.StatusBadRequest, "invalid host", why)
		return
	}
	ctx := r.Context()
	a, _, err := s.loadApp(ctx, app)
	if err != nil {
		s.storeError(w, "reading application "+app, err)
		return
	}
	c := fleet.Claim{Host: host, Account: a.Account, App: app}
	body, _ := marshalObject(c)
	etag, err := s.st.Put(ctx, fleet.PrefixDomains+host+".json", body, store.Condition{IfNoneMatch: true})
	if errors.Is(err, store.ErrPreconditionFailed) {
		held, hetag, gerr := s.loadClaim(ctx, host)
		if gerr != nil {
			s.storeError(w, "reading claim "+host, gerr)
			return
		}
		if held.App == app {
			writeObject(w, http.StatusOK, hetag, held) // already ours: idempotent
			return
		}
		writeError(w, http.StatusConflict, "host already claimed", fmt.Sprintf("%s is held by application %s", host, held.App))
		return
	}
	if err != nil {
		s.storeError(w, "claiming "+host, err)
		return
	}
	s.committed(ctx, r, auditRecord{Action: "domain.claim", Account: a.Account, App: app, Host: host})
	writeObject(w, http.StatusCreated, etag, c)
}

func (s *Server) handleDeleteClaim(w http.ResponseWriter, r *http.Request) {
	app, host, ok := s.claimParams(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	c, etag, err := s.loadClaim(ctx, host)
	if err != nil {
		s.storeError(w, "reading claim "+host, err)
		return
	}
	if c.App != app {
		writeError(w, http.StatusConflict, "held by another application", fmt.Sprintf("%s is held by application %s", host, c.App))
		return
	}
	if m := ifMatch(r); m != "" && !sameETag(etag, m) {
		writeError(w, http.StatusPreconditionFailed, "precondition failed", "If-Match does not match the current claim")
		return
	}
	if err := s.st.Delete(ctx, fleet.PrefixDomains+host+".json", etag); err != nil {
		s.storeError(w, "releasing "+host, err)
		return
	}
	s.committed(ctx, r, auditRecord{Action: "domain.release", Account: c.Account, App: app, Host: host, Prefixes: len(c.Paths)})
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

// claimForPaths loads host's claim and checks it is held by app and that the caller
// may publish for app.
func (s *Server) claimForPaths(w http.ResponseWriter, r *http.Request) (app, host string, c fleet.Claim, etag string, ok bool) {
	if app, host, ok = s.claimParams(w, r); !ok {
		return
	}
	ok = false
	ctx := r.Context()
	a, _, err := s.loadApp(ctx, app)
	if err != nil {
		s.storeError(w, "reading application "+app, err)
		return
	}
	if !s.authorizeApp(w, r, a, fleet.RolePublish, fleet.RoleInstance) {
		return
	}
	c, etag, err = s.loadClaim(ctx, host)
	if err != nil {
		s.storeError(w, "reading claim "+host, err)
		return
	}
	if c.App != app {
		writeError(w, http.StatusForbidden, "host held by another application", fmt.Sprintf("%s is held by application %s, not %s", host, c.App, app))
		return
	}
	ok = true
	return
}

func (s *Server) handleGetPaths(w http.ResponseWriter, r *http.Request) {
	_, _, c, etag, ok := s.claimForPaths(w, r)
	if !ok {
		return
	}
	paths := c.Paths
	if paths == nil {
		paths = map[string]string{}
	}
	writeObject(w, http.StatusOK, etag, pathsAnswer{Host: c.Host, Account: c.Account, App: c.App, Paths: paths})
}

// validatePaths checks every entry in sorted key order and names the first offender.
func validatePaths(m map[string]string) (map[string]string, error) {
	if len(m) > maxPrefixes {
		return nil, fmt.Errorf("paths: %d entries, at most %d per host", len(m), maxPrefixes)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]string, len(m))
	for _, k := range keys {
		if err := routing.ValidatePrefix("paths["+strconv.Quote(k)+"]", k); err != nil {
			return nil, err
		}
		t := routing.FoldHost(m[k])
		if err := routing.ValidateHost("paths["+strconv.Quote(k)+"] target", t); err != nil {
			return nil, err
		}
		out[k] = t
	}
	return out, nil
}

// pathWarnings lists targets that do not (yet) resolve to a ready route of the same
// account in the published document; the reconcile pass is the gate, so they are
// accepted but the publisher is told.
func (s *Server) pathWarnings(account string, paths map[string]string, ownHost string) []string {
	snap := s.pub.cur.Load()
	routes := map[string]routing.Route{}
	if snap != nil {
		for _, rt := range snap.doc.Routes {
			routes[rt.Host] = rt
		}
	}
	accounts := s.appAccounts()
	var warn []string
	keys := make([]string, 0, len(paths))
	for k := range paths {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t := paths[k]
		rt, ok := routes[t]
		switch {
		case t == ownHost:
			warn = append(warn, fmt.Sprintf("%s: target %s is this host itself", k, t))
		case !ok:
			warn = append(warn, fmt.Sprintf("%s: target %s is not a ready route yet; it routes nothing until it is", k, t))
		case accounts[rt.Application] != account:
			warn = append(warn, fmt.Sprintf("%s: target %s belongs to another account; it will never route", k, t))
		}
	}
	return warn
}

// appAccounts maps application → account from the reconciler's cache.
func (s *Server) appAccounts() map[string]string {
	return s.rec.appAccounts()
}

func (s *Server) handlePutPaths(w http.ResponseWriter, r *http.Request) {
	var body pathsBody
	if err := decodeStrict(r, &body); err != nil {
		badRequest(w, "invalid body", fmt.Errorf(`%w (want {"paths": {"<prefix>": "<host>"}})`, err))
		return
	}
	if body.Paths == nil {
		writeError(w, http.StatusBadRequest, "invalid body", `field "paths" is required: {"paths": {}} clears the map`)
		return
	}
	paths, err := validatePaths(*body.Paths)
	if err != nil {
		badRequest(w, "invalid paths", err)
		return
	}
	app, host, c, etag, ok := s.claimForPaths(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	want := ifMatch(r)
	for attempt := 0; ; attempt++ {
		if want != "" && !sameETag(etag, want) {
			writeError(w, http.StatusPreconditionFailed, "precondition failed", "If-Match does not match the current path map of "+host)
			return
		}
		next := c
		next.Paths = paths
		if len(paths) == 0 {
			next.Paths = nil
		}
		newBody, _ := marshalObject(next)
		oldBody, _ := marshalObject(c)
		warnings := s.pathWarnings(c.Account, paths, host)
		answer := pathsAnswer{Host: host, Account: c.Account, App: app, Paths: paths, Warnings: warnings}
		if string(newBody) == string(oldBody) {
			writeObject(w, http.StatusOK, etag, answer) // no-op republish: no write, no audit, no serial
			return
		}
		newETag, err := s.st.Put(ctx, fleet.PrefixDomains+host+".json", newBody, store.Condition{IfMatch: etag})
		if errors.Is(err, store.ErrPreconditionFailed) && want == "" && attempt < 20 {
			// Someone else wrote the claim between our read and write; without a
			// client If-Match, re-read and apply the wholesale replace again.
			if c, etag, err = s.loadClaim(ctx, host); err != nil {
				s.storeError(w, "reading claim "+host, err)
				return
			}
			if c.App != app {
				writeError(w, http.StatusConflict, "host changed hands", host+" is now held by "+c.App)
				return
			}
			continue
		}
		if err != nil {
			s.storeError(w, "publishing paths of "+host, err)
			return
		}
		s.committed(ctx, r, auditRecord{Action: "paths.put", Account: c.Account, App: app, Host: host, Prefixes: len(paths)})
		writeObject(w, http.StatusOK, newETag, answer)
		return
	}
}

// ---- instances ----

type instanceAnswer struct {
	App   string `json:"app"`
	Node  string `json:"node"`
	Port  int    `json:"port"`
	Ready bool   `json:"ready"`
}

func (s *Server) instanceApp(w http.ResponseWriter, r *http.Request) (string, bool) {
	app, ok := s.appParam(w, r)
	if !ok {
		return "", false
	}
	a, _, err := s.loadApp(r.Context(), app)
	if err != nil {
		s.storeError(w, "reading application "+app, err)
		return "", false
	}
	return app, s.authorizeApp(w, r, a, fleet.RoleInstance)
}

func (s *Server) handleListInstances(w http.ResponseWriter, r *http.Request) {
	recs := s.instances.records()
	out := []instanceAnswer{}
	for app, i := range recs {
		out = append(out, instanceAnswer{App: app, Node: s.cfg.Node.Name, Port: i.Port, Ready: i.Ready})
	}
	slices.SortFunc(out, func(a, b instanceAnswer) int { return strings.Compare(a.App, b.App) })
	writeJSON(w, http.StatusOK, map[string]any{"instances": out})
}

func (s *Server) handleAllocateInstance(w http.ResponseWriter, r *http.Request) {
	app, ok := s.instanceApp(w, r)
	if !ok {
		return
	}
	inst, created, err := s.instances.allocate(app)
	if err != nil {
		s.instanceError(w, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
		s.kickHeartbeat()
	}
	writeJSON(w, code, instanceAnswer{App: app, Node: s.cfg.Node.Name, Port: inst.Port, Ready: inst.Ready})
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
	if body.Port != nil && (*body.Port < 1 || *body.Port > 65535) {
		writeError(w, http.StatusBadRequest, "invalid port", fmt.Sprintf("port %d: must be 1..65535", *body.Port))
		return
	}
	app, ok := s.instanceApp(w, r)
	if !ok {
		return
	}
	// An application token may only name a port from the node's allocation range: any
	// other port could point the app's public hostname at a node-local service (a
	// database, SSH, this API). The admin may set any port.
	if p := body.Port; p != nil && !principalOf(r).admin &&
		(*p < s.cfg.Ports.Min || *p > s.cfg.Ports.Max || *p == s.cfg.Node.APIPort) {
		writeError(w, http.StatusForbidden, "port outside the allocation range",
			fmt.Sprintf("port %d: application tokens may only use ports %d..%d (POST allocates one)", *p, s.cfg.Ports.Min, s.cfg.Ports.Max))
		return
	}
	inst, changed, err := s.instances.set(app, body.Port, *body.Ready)
	if err != nil {
		s.instanceError(w, err)
		return
	}
	if changed {
		s.kickHeartbeat()
	}
	writeJSON(w, http.StatusOK, instanceAnswer{App: app, Node: s.cfg.Node.Name, Port: inst.Port, Ready: inst.Ready})
}

func (s *Server) handleDeleteInstance(w http.ResponseWriter, r *http.Request) {
	app, ok := s.instanceApp(w, r)
	if !ok {
		return
	}
	if err := s.instances.release(app); err != nil {
		s.instanceError(w, err)
		return
	}
	s.kickHeartbeat()
	writeJSON(w, http.StatusOK, map[string]any{"released": app, "quarantine": time.Duration(s.cfg.Ports.Quarantine).String()})
}

func (s *Server) instanceError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrPortTaken):
		writeError(w, http.StatusConflict, "port taken", err.Error())
	case errors.Is(err, ErrNoInstance):
		writeError(w, http.StatusNotFound, "no instance", err.Error()+" (POST allocates one)")
	case errors.Is(err, ErrNoFreePort):
		writeError(w, http.StatusServiceUnavailable, "no free port", err.Error())
	case errors.Is(err, ErrPortOutOfRange):
		writeError(w, http.StatusBadRequest, "invalid port", err.Error())
	default:
		s.log.Error("instance registry", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
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
	if err := routing.ValidateLabel("account", body.Account); err != nil {
		badRequest(w, "invalid account", err)
		return
	}
	if err := routing.ValidateLabel("app", body.App); err != nil {
		badRequest(w, "invalid app", err)
		return
	}
	if len(body.Roles) == 0 {
		writeError(w, http.StatusBadRequest, "invalid roles", `roles: at least one of "publish", "instance"`)
		return
	}
	roles := slices.Clone(body.Roles)
	slices.Sort(roles)
	roles = slices.Compact(roles)
	for _, ro := range roles {
		if ro != fleet.RolePublish && ro != fleet.RoleInstance {
			writeError(w, http.StatusBadRequest, "invalid roles", fmt.Sprintf("role %q: want publish or instance", ro))
			return
		}
	}
	ctx := r.Context()
	a, _, err := s.loadApp(ctx, body.App)
	if err != nil {
		s.storeError(w, "reading application "+body.App, err)
		return
	}
	if a.Account != body.Account {
		writeError(w, http.StatusBadRequest, "invalid account", fmt.Sprintf("application %s belongs to account %q, not %q", a.Name, a.Account, body.Account))
		return
	}
	if a.ControlPlane {
		writeError(w, http.StatusForbidden, "control plane", "application tokens are refused on the control-plane application")
		return
	}
	idb := make([]byte, 8)
	secret := make([]byte, 32)
	rand.Read(idb)
	rand.Read(secret)
	id := hex.EncodeToString(idb)
	tok := "scafo_" + id + "_" + hex.EncodeToString(secret)
	rec := fleet.TokenRecord{ID: id, Account: body.Account, App: body.App, Roles: roles, SHA256: hashToken(tok)}
	b, _ := marshalObject(rec)
	if _, err := s.st.Put(ctx, fleet.PrefixTokens+id+".json", b, store.Condition{IfNoneMatch: true}); err != nil {
		s.storeError(w, "storing token", err)
		return
	}
	s.committed(ctx, r, auditRecord{Action: "token.create", Account: body.Account, App: body.App, Token: id})
	writeJSON(w, http.StatusCreated, map[string]any{"id": id, "token": tok, "account": rec.Account, "app": rec.App, "roles": rec.Roles})
}

func (s *Server) handleDeleteToken(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if !isHexID(id) {
		writeError(w, http.StatusBadRequest, "invalid id", fmt.Sprintf("id %q: want 16 hex characters", id))
		return
	}
	ctx := r.Context()
	obj, err := s.st.Get(ctx, fleet.PrefixTokens+id+".json")
	if err != nil {
		s.storeError(w, "reading token "+id, err)
		return
	}
	var rec fleet.TokenRecord
	json.Unmarshal(obj.Value, &rec)
	if err := s.st.Delete(ctx, fleet.PrefixTokens+id+".json", obj.ETag); err != nil {
		s.storeError(w, "revoking token "+id, err)
		return
	}
	s.committed(ctx, r, auditRecord{Action: "token.revoke", Account: rec.Account, App: rec.App, Token: id})
	writeJSON(w, http.StatusOK, map[string]string{"revoked": id})
}

func isHexID(s string) bool {
	if len(s) != 16 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// ---- audit ----

// auditRecord is one change made through the API. Path-map records carry the prefix
// count, never the targets.
type auditRecord struct {
	Time     time.Time `json:"time"`
	Actor    string    `json:"actor"`
	Node     string    `json:"node"`
	Action   string    `json:"action"`
	Account  string    `json:"account,omitempty"`
	App      string    `json:"app,omitempty"`
	Host     string    `json:"host,omitempty"`
	Prefixes int       `json:"prefixes"`
	Token    string    `json:"token,omitempty"`
}

// committed runs after every write that changed something: it appends the audit
// record, then bumps the serial, then asks for a reconcile pass. The change itself is
// already durable; a failure here is logged (the full pass catches up).
func (s *Server) committed(ctx context.Context, r *http.Request, rec auditRecord) {
	ctx = context.WithoutCancel(ctx)
	rec.Time = time.Now().UTC()
	rec.Actor = principalOf(r).actor()
	rec.Node = s.cfg.Node.Name
	b, _ := marshalObject(rec)
	suffix := make([]byte, 4)
	rand.Read(suffix)
	key := prefixAudit + rec.Time.Format("20060102T150405.000000000Z") + "-" + hex.EncodeToString(suffix) + ".json"
	if _, err := s.st.Put(ctx, key, b, store.Condition{IfNoneMatch: true}); err != nil {
		s.log.Error("writing audit record", "action", rec.Action, "err", err)
	}
	s.log.Info("change", "action", rec.Action, "actor", rec.Actor, "account", rec.Account, "app", rec.App, "host", rec.Host, "prefixes", rec.Prefixes)
	if err := s.bumpSerial(ctx); err != nil {
		s.log.Error("bumping serial", "err", err)
	}
	s.metrics.storeWrites.WithLabelValues(rec.Action, "ok").Inc()
	s.kickReconcile()
}

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			writeError(w, http.StatusBadRequest, "invalid limit", "limit: 1..10000")
			return
		}
		limit = n
	}
	entries, err := s.st.List(r.Context(), prefixAudit)
	if err != nil {
		s.storeError(w, "listing audit", err)
		return
	}
	out := []auditRecord{}
	for i := len(entries) - 1; i >= 0 && len(out) < limit; i-- {
		obj, err := s.st.Get(r.Context(), entries[i].Key)
		if err != nil {
			continue
		}
		var rec auditRecord
		if json.Unmarshal(obj.Value, &rec) == nil {
			out = append(out, rec)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": out})
}
