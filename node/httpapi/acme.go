package httpapi

import (
	"net/http"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetcerts"
)

// The fleet certificates' HTTP side: the ACME challenge route and /v1/status's
// certificates (the manager is wired in the root package, acme.go there).

// handleACMEChallenge answers GET /.well-known/acme-challenge/{token}: anonymous (the CA
// asks), only for a name the fleet issues and a token CertMagic stored; everything else
// is 404 without a store read.
type challengeHandler struct {
	certs *fleetcerts.Manager // nil: acme.enabled is off
}

func (h challengeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.certs != nil && h.certs.HandleChallenge(w, r) {
		return
	}
	writeError(w, http.StatusNotFound, "not found", "no ACME challenge pending for this host and token")
}

// certsStatus is /v1/status's certificates (nil without a manager).
func certsStatus(certs *fleetcerts.Manager) *api.Certificates {
	if certs == nil {
		return nil
	}
	out := &api.Certificates{Counts: map[string]int{}, Names: certs.Status()}
	for _, n := range out.Names {
		out.Counts[n.State]++
	}
	return out
}
