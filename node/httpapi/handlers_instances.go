package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/scafo/ingress/node/fleetwrite"
)

// Adapters of the instance, token and audit operations of the write domain.

// instancesHandler serves /v1/node/instances: this node's instances.
type instancesHandler struct {
	writer     *fleetwrite.Writer
	log        *slog.Logger
	quarantine time.Duration // ports.quarantine, said in a release's answer
}

// tokensHandler serves /v1/tokens: issuing and revoking application tokens.
type tokensHandler struct {
	writer *fleetwrite.Writer
	log    *slog.Logger
}

// auditHandler serves /v1/audit: the write domain's audit log.
type auditHandler struct {
	writer *fleetwrite.Writer
	log    *slog.Logger
}

// ---- instances ----

func (h *instancesHandler) list(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"instances": h.writer.Instances()})
}

func (h *instancesHandler) allocate(w http.ResponseWriter, r *http.Request) {
	inst, isNew, err := h.writer.AllocateInstance(r.Context(), actorOf(r), chi.URLParam(r, "app"))
	if err != nil {
		writeDomainError(w, h.log, err)
		return
	}
	writeJSON(w, created(isNew), inst)
}

func (h *instancesHandler) put(w http.ResponseWriter, r *http.Request) {
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
	force, err := forceParam(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid force", err.Error())
		return
	}
	inst, err := h.writer.PutInstance(r.Context(), actorOf(r), chi.URLParam(r, "app"), body.Port, *body.Ready, force)
	if err != nil {
		writeDomainError(w, h.log, err)
		return
	}
	writeJSON(w, http.StatusOK, inst)
}

// forceParam is ?force= of an instance PUT: true (or 1) moves the instance without
// checking that the new port serves; false, 0 or absent checks it.
func forceParam(r *http.Request) (bool, error) {
	vs, ok := r.URL.Query()["force"]
	if !ok {
		return false, nil
	}
	if len(vs) != 1 {
		return false, fmt.Errorf("force: given %d times", len(vs))
	}
	switch vs[0] {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("force %.30q: true or false", vs[0])
}

func (h *instancesHandler) release(w http.ResponseWriter, r *http.Request) {
	app := chi.URLParam(r, "app")
	if err := h.writer.ReleaseInstance(r.Context(), actorOf(r), app); err != nil {
		writeDomainError(w, h.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"released": app, "quarantine": h.quarantine.String()})
}

// ---- tokens ----

func (h *tokensHandler) create(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Account string   `json:"account"`
		App     string   `json:"app"`
		Roles   []string `json:"roles"`
	}
	if err := decodeStrict(r, &body); err != nil {
		badRequest(w, "invalid body", err)
		return
	}
	tok, err := h.writer.IssueToken(r.Context(), actorOf(r), body.Account, body.App, body.Roles)
	if err != nil {
		writeDomainError(w, h.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, tok)
}

func (h *tokensHandler) revoke(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if err := h.writer.RevokeToken(r.Context(), actorOf(r), id); err != nil {
		writeDomainError(w, h.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"revoked": id})
}

// ---- audit ----

// ServeHTTP answers GET /v1/audit[?limit=N][&app=][&actor=][&action=][&since=]: the
// records matching every filter given, newest first; since is an RFC 3339 time or a
// duration back from now (1h, 30m). "truncated": true when the read stopped at
// fleetwrite.AuditScanMax records examined.
func (h *auditHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := fleetwrite.AuditFilter{Limit: 100, App: q.Get("app"), Actor: q.Get("actor"), Action: q.Get("action")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			n = -1
		}
		f.Limit = n
	}
	if v := q.Get("since"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			f.Since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, v); err == nil {
			f.Since = t
		} else {
			writeError(w, http.StatusBadRequest, "invalid since", fmt.Sprintf("since %.40q: an RFC 3339 time (2026-01-02T15:04:05Z) or a duration back from now (1h)", v))
			return
		}
	}
	recs, truncated, err := h.writer.AuditFiltered(r.Context(), f)
	if err != nil {
		writeDomainError(w, h.log, err)
		return
	}
	body := map[string]any{"records": recs}
	if truncated {
		body["truncated"] = true
	}
	writeJSON(w, http.StatusOK, body)
}
