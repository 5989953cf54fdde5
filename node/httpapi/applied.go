package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/render"
)

// The applied probe of an HTTP-provider Traefik (docs/design.md §11): the poll names
// its ingress (X-Scafo-Ingress) and declares one of its entry points
// (X-Scafo-Applied-Probe); its body then makes that Traefik call the node back at
// /v1/ingress/applied/<ingress>/<revision>/<mac> once it serves it (render.WithAppliedProbe),
// through the node URL it polled.

// appliedProbe reads a poll's applied probe: nil without the header; an error naming
// the field when it is malformed or cannot apply (answered 400).
func (s *API) appliedProbe(r *http.Request, format string, admin bool) (*publish.Probe, error) {
	vals := r.Header.Values(api.HeaderAppliedProbe)
	if len(vals) == 0 {
		return nil, nil
	}
	if len(vals) > 1 {
		return nil, fmt.Errorf("%s: given %d times", api.HeaderAppliedProbe, len(vals))
	}
	ep, err := render.ValidateBaseURL(vals[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %v", api.HeaderAppliedProbe, err)
	}
	switch {
	case admin:
		return nil, fmt.Errorf("%s: the admin token is not an ingress", api.HeaderAppliedProbe)
	case format != api.FormatTraefik:
		return nil, fmt.Errorf("%s: only on %s%s", api.HeaderAppliedProbe, api.PathIngress, api.FormatTraefik)
	case r.Header.Get(api.HeaderIngress) == "":
		return nil, fmt.Errorf("%s: needs %s (the ingress it reports for)", api.HeaderAppliedProbe, api.HeaderIngress)
	case r.Header.Get(api.HeaderIngressKind) == api.KindPlugin:
		return nil, fmt.Errorf("%s: the plugin probes on its own (appliedProbe); only an HTTP-provider Traefik declares it", api.HeaderAppliedProbe)
	}
	rep, err := s.ingresses.Parse(r.Header)
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	// The callback goes where this poll came: the node as that Traefik reaches it.
	node, err := render.ValidateBaseURL(scheme + "://" + r.Host)
	if err != nil {
		return nil, fmt.Errorf("Host: %v", err)
	}
	return &publish.Probe{Ingress: rep.Name, EntryPoint: ep, Node: node, MAC: s.appliedMAC}, nil
}

func (s *API) appliedMAC(ingress, revision string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	mac, ok := s.writer.AppliedMAC(ctx, ingress, revision)
	if !ok {
		s.log.Warn("no MAC key for the applied probe: the body is served without it, and ?wait=applied waits for that ingress until the timeout", "ingress", ingress)
	}
	return mac, ok
}

// handleApplied is the callback: anonymous, verified by its MAC alone (no store read);
// a path that does not verify is 404, like any unknown path.
func (s *API) handleApplied(w http.ResponseWriter, r *http.Request) {
	name, rev, mac := chi.URLParam(r, "ingress"), chi.URLParam(r, "revision"), chi.URLParam(r, "mac")
	if !s.writer.VerifyAppliedMAC(name, rev, mac) {
		writeError(w, http.StatusNotFound, "not found", r.URL.Path)
		return
	}
	status := "unknown"
	switch s.ingresses.Applied(name, rev) {
	case ingress.AppliedRecorded:
		status = "recorded"
	case ingress.AppliedAlready:
		status = "already"
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": status})
}
