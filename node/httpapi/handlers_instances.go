package httpapi

import (
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
	inst, err := h.writer.SetInstance(r.Context(), actorOf(r), chi.URLParam(r, "app"), body.Port, *body.Ready)
	if err != nil {
		writeDomainError(w, h.log, err)
		return
	}
	writeJSON(w, http.StatusOK, inst)
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

func (h *auditHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			n = -1
		}
		limit = n
	}
	recs, err := h.writer.Audit(r.Context(), limit)
	if err != nil {
		writeDomainError(w, h.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": recs})
}
