package render

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/traefik/genconf/dynamic"
	"github.com/traefik/genconf/dynamic/tls"

	"github.com/scafo/ingress/render/routing"
)

// Fleet certificates (docs/design.md §10): what fleet ACME issuance adds to the render. The
// render stays a pure function: FleetCerts is an input, built by the node from the
// certificates in the fleet store, identical on every node once they have read the
// same store.

// ACMEChallengePath is the HTTP-01 challenge path prefix (RFC 8555 §8.3).
const ACMEChallengePath = "/.well-known/acme-challenge/"

// PriorityACMEChallenge is the challenge router's priority: the highest Traefik v3.6
// accepts from a provider (pkg/server/router: maxUserPriority = math.MaxInt - 1000),
// above every router the render writes and every router an operator writes with a
// lower one. An entry point's HTTPS redirection is an internal router at
// math.MaxInt - 1, which no provider can outrank: the entry point needs
// allowACMEByPass: true (the shipped deploy/traefik/traefik.yml has it), which makes
// the redirection leave /.well-known/acme-challenge/ alone.
const PriorityACMEChallenge = math.MaxInt - 1000

// routerACMEChallenge names the challenge router (kind "acme-", one component).
const routerACMEChallenge = "acme-challenge"

// FleetCerts is the fleet-certificate part of a render.
type FleetCerts struct {
	// HTTPEntryPoints carry the challenge router (plain HTTP: the CA validates on
	// port 80). Default ["web"].
	HTTPEntryPoints []string
	// Managed are the names the fleet issues. Their routers get `tls: {}` (no
	// resolver): Traefik picks the certificate by SNI from tls.certificates, or answers
	// with its default certificate until the name's certificate arrives.
	Managed map[string]bool
	// Certificates are delivered in tls.certificates, in any order (the render sorts
	// them by their first name).
	Certificates []Certificate
}

// CertSet is one immutable view of the fleet certificates (node/fleetcerts makes it;
// node/publish renders with it).
type CertSet struct {
	// Fingerprint changes whenever anything the render reads changes ("" for an empty
	// set with no managed names).
	Fingerprint string
	FleetCerts  *FleetCerts
}

// String is for logs: counts only.
func (s *CertSet) String() string {
	if s == nil || s.FleetCerts == nil {
		return "fleet certificates: none"
	}
	return fmt.Sprintf("fleet certificates: %d names, %d certificates", len(s.FleetCerts.Managed), len(s.FleetCerts.Certificates))
}

// Certificate is one certificate and its key. CertFile and KeyFile are what Traefik's
// FileOrContent takes: the PEM itself (inline: Traefik v3.6 pkg/tls reads a value that
// is not an existing path as content) or a file path (a Traefik beside its node).
type Certificate struct {
	// Names are the certificate's DNS names (sorted); the first is its sort key.
	Names    []string
	CertFile string
	KeyFile  string
}

// TraefikFleet is Traefik with fleet certificates: the challenge router, `tls: {}` on
// the routers of managed names, and tls.certificates. fc nil is Traefik.
func TraefikFleet(doc *routing.Document, opt Options, fc *FleetCerts) ([]byte, error) {
	return renderTraefik(doc, opt, fc)
}

// fleetTLS is the tls section of a managed name's routers: none of the resolver's
// fields, so Traefik serves the name from its certificate store.
var fleetTLS = &dynamic.RouterTLSConfig{}

// managed reports whether host's routers take a fleet certificate.
func (r *renderer) managed(host string) bool {
	return r.fleet != nil && r.fleet.Managed[host]
}

// acme adds the challenge router. It needs the API chain (the document's API
// section): without one there is nothing to send a challenge to, and the router is
// left out. The certificates are fleetCertificates.
func (r *renderer) acme(doc *routing.Document) {
	fc := r.fleet
	if fc == nil {
		return
	}
	if doc.API != nil && len(doc.API.Hosts) > 0 {
		r.routers[routerACMEChallenge] = &dynamic.Router{
			EntryPoints: challengeEntryPoints(fc),
			Service:     serviceRef(svcAPI, doc.API.Upstreams), // the API routers' service: the leaf itself when there is one upstream
			Rule:        challengeRule(passthroughHosts(doc)),
			Priority:    PriorityACMEChallenge,
		}
	}
}

// challengeEntryPoints are the challenge router's entry points.
func challengeEntryPoints(fc *FleetCerts) []string {
	if len(fc.HTTPEntryPoints) == 0 {
		return []string{DefaultEntryPoint}
	}
	return fc.HTTPEntryPoints
}

// fleetCertificates is the tls section of fc's certificates sorted by first name, nil
// when there are none. doc has its routes in host order; with keep (a group selection)
// only the certificates of a name the output routes stay: the exact host of a kept
// route, or an API apex (fleet-wide, in every group).
func fleetCertificates(fc *FleetCerts, doc *routing.Document, keep func(*routing.Route) bool) *TLSConfiguration {
	if fc == nil || len(fc.Certificates) == 0 {
		return nil
	}
	certs := make([]Certificate, 0, len(fc.Certificates))
	for _, c := range fc.Certificates {
		if keep == nil || slices.ContainsFunc(c.Names, func(n string) bool { return routedName(doc, keep, n) }) {
			certs = append(certs, c)
		}
	}
	if len(certs) == 0 {
		return nil
	}
	slices.SortFunc(certs, func(a, b Certificate) int {
		return cmp.Compare(firstName(a), firstName(b))
	})
	out := make([]*tls.CertAndStores, 0, len(certs))
	for _, c := range certs {
		out = append(out, &tls.CertAndStores{Certificate: tls.Certificate{CertFile: c.CertFile, KeyFile: c.KeyFile}})
	}
	return &TLSConfiguration{Certificates: out}
}

// routedName reports whether name is an API apex of doc or the host of a route keep
// keeps (doc's routes in host order). A wildcard name "*.d" is also routed when keep
// keeps a host one label under d: the fleet's platform wildcard serves those hosts,
// which carry no certificate of their own.
func routedName(doc *routing.Document, keep func(*routing.Route) bool, name string) bool {
	if doc.API != nil && slices.Contains(doc.API.Hosts, name) {
		return true
	}
	if i, ok := routing.RouteIndex(doc.Routes, name); ok && keep(&doc.Routes[i]) {
		return true
	}
	if base, ok := strings.CutPrefix(name, "*."); ok {
		for i := range doc.Routes {
			if _, parent, _ := strings.Cut(doc.Routes[i].Host, "."); parent == base && keep(&doc.Routes[i]) {
				return true
			}
		}
	}
	return false
}

func firstName(c Certificate) string {
	if len(c.Names) == 0 {
		return ""
	}
	return c.Names[0]
}
