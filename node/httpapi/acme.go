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
	names := certs.Status()
	out := &api.Certificates{Counts: map[string]int{}}
	if names != nil {
		out.Names = make([]api.CertName, len(names))
	}
	for i, n := range names {
		out.Names[i] = certNameOf(n)
		out.Counts[n.State]++
	}
	return out
}

// certNameOf is one name of the manager's status on the wire, field by field
// (TestCertNameOnTheWireCarriesEveryManagerField holds it to every field).
func certNameOf(n fleetcerts.NameStatus) api.CertName {
	c := api.CertName{Name: n.Name, State: n.State, NotAfter: n.NotAfter, Serial: n.Serial,
		LastError: n.LastError, NextAttempt: n.NextAttempt, Attempts: n.Attempts, ObtainedHere: n.ObtainedHere,
		Challenge: n.Challenge, Phase: n.Phase}
	if d := n.Delegation; d != nil {
		c.Delegation = &api.CertDelegation{CNAME: d.CNAME, Target: d.Target, InPlace: d.InPlace, CheckedAt: d.CheckedAt}
	}
	return c
}
