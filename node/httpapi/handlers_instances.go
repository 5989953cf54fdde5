package httpapi

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
)

// Adapters of the instance, token and audit operations of the write domain.

// ---- instances ----

func (s *API) handleListInstances(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"instances": s.writer.Instances()})
}

func (s *API) handleAllocateInstance(w http.ResponseWriter, r *http.Request) {
	inst, isNew, err := s.writer.AllocateInstance(r.Context(), actorOf(r), chi.URLParam(r, "app"))
	if err != nil {
		s.writeDomainError(w, err)
		return
	}
	writeJSON(w, created(isNew), inst)
}

func (s *API) handlePutInstance(w http.ResponseWriter, r *http.Request) {
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

func (s *API) handleDeleteInstance(w http.ResponseWriter, r *http.Request) {
	app := chi.URLParam(r, "app")
	if err := s.writer.ReleaseInstance(r.Context(), actorOf(r), app); err != nil {
		s.writeDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"released": app, "quarantine": s.cfg.PortsQuarantine.String()})
}

// ---- tokens ----

func (s *API) handleCreateToken(w http.ResponseWriter, r *http.Request) {
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

func (s *API) handleDeleteToken(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if err := s.writer.RevokeToken(r.Context(), actorOf(r), id); err != nil {
		s.writeDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"revoked": id})
}

// ---- audit ----

func (s *API) handleAudit(w http.ResponseWriter, r *http.Request) {
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
