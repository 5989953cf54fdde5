package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/ingress"
)

// The applied probe of an HTTP-provider Traefik (docs/design.md §11): the poll names
// its ingress (X-Scafo-Ingress) and declares one of its entry points
// (X-Scafo-Applied-Probe); its body then makes that Traefik call the node back at
// /v1/ingress/applied/<ingress>/<revision>/<mac> once it serves it (render.WithAppliedProbe),
// through the node URL it polled.

// appliedMAC is the MAC of the applied probe's callback path (publish.Probe's MAC).
func (h *pollHandler) appliedMAC(ingress, revision string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	mac, ok := h.writer.AppliedMAC(ctx, ingress, revision)
	if !ok {
		h.log.Warn("no MAC key for the applied probe: the body is served without it, and ?wait=applied waits for that ingress until the timeout", "ingress", ingress)
	}
	return mac, ok
}

// appliedHandler is the callback: anonymous, verified by its MAC alone (no store read);
// a path that does not verify is 404, like any unknown path.
type appliedHandler struct {
	writer    *fleetwrite.Writer
	ingresses *ingress.Book
}

func (h *appliedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, rev, mac := chi.URLParam(r, "ingress"), chi.URLParam(r, "revision"), chi.URLParam(r, "mac")
	if !h.writer.VerifyAppliedMAC(name, rev, mac) {
		writeError(w, http.StatusNotFound, "not found", r.URL.Path)
		return
	}
	status := "unknown"
	switch h.ingresses.Applied(name, rev) {
	case ingress.AppliedRecorded:
		status = "recorded"
	case ingress.AppliedAlready:
		status = "already"
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": status})
}
