package httpapi

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/render/fleet"
)

// Adapters of the application, claim and path-map operations of the write domain.

// appsHandler serves /v1/apps: applications, their claims and their path maps.
type appsHandler struct {
	writer   *fleetwrite.Writer
	log      *slog.Logger
	pub      Publisher  // the published document, for path warnings
	rec      Reconciler // the applications and node records known, for warnings
	nodeName string
}

// ---- applications ----

func (h *appsHandler) listApps(w http.ResponseWriter, r *http.Request) {
	apps, err := h.writer.Apps(r.Context())
	if err != nil {
		writeDomainError(w, h.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"apps": apps})
}

func (h *appsHandler) getApp(w http.ResponseWriter, r *http.Request) {
	a, etag, err := h.writer.App(r.Context(), chi.URLParam(r, "app"))
	if err != nil {
		writeDomainError(w, h.log, err)
		return
	}
	writeObject(w, http.StatusOK, etag, a)
}

func (h *appsHandler) putApp(w http.ResponseWriter, r *http.Request) {
	app := chi.URLParam(r, "app")
	if err := fleetwrite.ValidateAppName(app); err != nil {
		writeDomainError(w, h.log, err)
		return
	}
	var a fleet.App
	if err := decodeStrict(r, &a); err != nil {
		badRequest(w, "invalid body", err)
		return
	}
	a, etag, isNew, err := h.writer.PutApp(r.Context(), actorOf(r), app, a, ifMatch(r))
	if err != nil {
		writeConditionalError(w, r, h.log, err)
		return
	}
	warn := append(h.writer.AppWarnings(a), h.placementWarnings(a)...)
	writeObject(w, created(isNew), etag, appAnswer{App: a, Warnings: warn})
}

// appAnswer is a written application, with what its writer should know (an ingress
// group no platform domain is in: no platform host; a placement on a node no record
// names). Warnings is absent when there are
// none, so the answer is the application's object as before.
type appAnswer struct {
	fleet.App
	Warnings []string `json:"warnings,omitempty"`
}

func (h *appsHandler) deleteApp(w http.ResponseWriter, r *http.Request) {
	app := chi.URLParam(r, "app")
	if err := h.writer.DeleteApp(r.Context(), actorOf(r), app, ifMatch(r)); err != nil {
		writeConditionalError(w, r, h.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": app})
}

// ---- claims ----

// claimParams validates the {app} and {host} of a claim URL.
func (h *appsHandler) claimParams(w http.ResponseWriter, r *http.Request) (app, host string, ok bool) {
	app = chi.URLParam(r, "app")
	err := fleetwrite.ValidateAppName(app)
	if err == nil {
		host, err = fleetwrite.CanonicalHost(chi.URLParam(r, "host"))
	}
	if err != nil {
		writeDomainError(w, h.log, err)
		return "", "", false
	}
	return app, host, true
}

func (h *appsHandler) getClaim(w http.ResponseWriter, r *http.Request) {
	app, host, ok := h.claimParams(w, r)
	if !ok {
		return
	}
	c, etag, err := h.writer.ClaimOf(r.Context(), app, host)
	if err != nil {
		writeDomainError(w, h.log, err)
		return
	}
	writeObject(w, http.StatusOK, etag, c)
}

func (h *appsHandler) putClaim(w http.ResponseWriter, r *http.Request) {
	app, host, ok := h.claimParams(w, r)
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
	c, etag, isNew, err := h.writer.Claim(r.Context(), actorOf(r), app, host)
	if err != nil {
		writeDomainError(w, h.log, err)
		return
	}
	writeObject(w, created(isNew), etag, c)
}

func (h *appsHandler) deleteClaim(w http.ResponseWriter, r *http.Request) {
	app, host, ok := h.claimParams(w, r)
	if !ok {
		return
	}
	if err := h.writer.Release(r.Context(), actorOf(r), app, host, ifMatch(r)); err != nil {
		writeConditionalError(w, r, h.log, err)
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
func (h *appsHandler) refusePathsFirst(w http.ResponseWriter, r *http.Request, answer func()) {
	if who := actorOf(r); !who.Admin {
		app := chi.URLParam(r, "app")
		if fleetwrite.ValidateAppName(app) == nil {
			if err := h.writer.AuthorizePaths(r.Context(), who, app); err != nil {
				writeDomainError(w, h.log, err)
				return
			}
		}
	}
	answer()
}

// pathsParams is claimParams for the path-map door (refusePathsFirst).
func (h *appsHandler) pathsParams(w http.ResponseWriter, r *http.Request) (app, host string, ok bool) {
	app = chi.URLParam(r, "app")
	err := fleetwrite.ValidateAppName(app)
	if err == nil {
		host, err = fleetwrite.CanonicalHost(chi.URLParam(r, "host"))
	}
	if err != nil {
		h.refusePathsFirst(w, r, func() { writeDomainError(w, h.log, err) })
		return "", "", false
	}
	return app, host, true
}

func (h *appsHandler) getPaths(w http.ResponseWriter, r *http.Request) {
	app, host, ok := h.pathsParams(w, r)
	if !ok {
		return
	}
	c, etag, err := h.writer.Paths(r.Context(), actorOf(r), app, host)
	if err != nil {
		writeDomainError(w, h.log, err)
		return
	}
	writeObject(w, http.StatusOK, etag, answerPaths(c, nil))
}

func (h *appsHandler) putPaths(w http.ResponseWriter, r *http.Request) {
	var body pathsBody
	if err := decodeStrict(r, &body); err != nil {
		h.refusePathsFirst(w, r, func() {
			badRequest(w, "invalid body", fmt.Errorf(`%w (want {"paths": {"<prefix>": "<host>"}})`, err))
		})
		return
	}
	if body.Paths == nil {
		h.refusePathsFirst(w, r, func() {
			writeError(w, http.StatusBadRequest, "invalid body", `field "paths" is required: {"paths": {}} clears the map`)
		})
		return
	}
	if _, err := fleetwrite.ValidatePaths(*body.Paths); err != nil {
		h.refusePathsFirst(w, r, func() { writeDomainError(w, h.log, err) })
		return
	}
	app, host, ok := h.pathsParams(w, r)
	if !ok {
		return
	}
	c, etag, err := h.writer.PublishPaths(r.Context(), actorOf(r), app, host, *body.Paths, ifMatch(r))
	if err != nil {
		writeConditionalError(w, r, h.log, err)
		return
	}
	writeObject(w, http.StatusOK, etag, answerPaths(c, h.pathWarnings(c)))
}
