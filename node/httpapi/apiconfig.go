package httpapi

// The api.* settings: the platform API apex, and the names the API answers to
// (hosts.go).

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/scafo/ingress/render/routing"
)

// APIConfig is the api section.
type APIConfig struct {
	Public bool `description:"Route the bare platform apex to the node API." json:"public"`
	// AllowedHosts: DNS rebinding (hosts.go). A browser sends the name of the page it
	// loaded as the Host; a node answers only names it goes by.
	AllowedHosts []string `description:"DNS names the API answers to besides IP addresses, localhost, node.name and the platform domains (the API apex): a name an ingress, the Caddy module or the CLI reaches this node by (e.g. node-1.internal.example.com). A request for any other Host is answered 421 (a defence against DNS rebinding; docs/security.md)." json:"allowedHosts,omitempty"`
}

// DefaultAPI are the api.* defaults.
func DefaultAPI() APIConfig { return APIConfig{Public: true} }

// Validate lists what is wrong with c (nil when it is valid). It reports and changes
// nothing; names are compared folded (hosts.go), so any case is accepted.
func (c APIConfig) Validate() []error {
	var errs []error
	for i, h := range c.AllowedHosts {
		field := fmt.Sprintf("api.allowedHosts[%d]", i)
		name := foldName(h)
		switch {
		case strings.ContainsAny(h, ":/[]@ "):
			errs = append(errs, fmt.Errorf("%s %.80q: a host name alone (no scheme, port, path or IP literal)", field, h))
		case isIP(name):
			errs = append(errs, fmt.Errorf("%s %.80q: an IP address is always answered; list DNS names only", field, h))
		case !strings.Contains(name, "."):
			if err := routing.ValidateLabel(field, name); err != nil {
				errs = append(errs, err)
			}
		default:
			if err := routing.ValidateHost(field, name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// foldName is a host name as the guard compares it: lowercase, without a trailing dot.
func foldName(s string) string {
	return strings.TrimSuffix(routing.FoldHost(strings.TrimSpace(s)), ".")
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}
