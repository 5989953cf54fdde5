package node

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// validateBounds lists what is wrong with values of c that parse but mean nothing a
// fleet wants (issue 39 items 6 and 7; the sections' own, such as probe.interval's
// floor, are in their Validate). It reports and changes nothing. listenPort is the port of listen (0 when
// it did not parse: Validate has reported that).
func (c *Config) validateBounds(listenPort int) []error {
	var errs []error
	// The node's own listen port inside the instance range: an instance could be given
	// it, and its host would then route to the node API itself, outside the apex's
	// denied paths (node.apiPort is checked in Validate).
	if p := listenPort; p != 0 && p >= c.Ports.Min && p <= c.Ports.Max {
		errs = append(errs, fmt.Errorf("listen %q: port %d is inside ports.min..ports.max (%d..%d): an application could be given the node's own port", c.Listen, p, c.Ports.Min, c.Ports.Max))
	}
	if ip := net.ParseIP(c.Node.Address); ip != nil && ip.IsUnspecified() {
		errs = append(errs, fmt.Errorf("node.address %q: the unspecified address routes nowhere: set this node's address on the fleet's private network", c.Node.Address))
	}
	errs = append(errs, validatePlatformDomainSet(c.Platform.Domains)...)
	return errs
}

// validatePlatformDomainSet refuses a platform domain that is a public suffix (co.uk:
// every application would take a name under a registry's zone) and two platform
// domains nested one in the other (example.com and apps.example.com: an application
// named apps would take the second one's apex). domains are folded.
func validatePlatformDomainSet(domains []string) []error {
	var errs []error
	for i, d := range domains {
		if ps, icann := publicsuffix.PublicSuffix(d); ps == d && (icann || strings.Contains(d, ".")) {
			errs = append(errs, fmt.Errorf("platform.domains[%d] %q: a public suffix; use a domain you hold under it", i, d))
		}
		for j, e := range domains {
			if i != j && strings.HasSuffix(d, "."+e) {
				errs = append(errs, fmt.Errorf("platform.domains[%d] %q: under platform.domains[%d] %q: an application named %q would take its apex",
					i, d, j, e, strings.TrimSuffix(d, "."+e)[strings.LastIndex(strings.TrimSuffix(d, "."+e), ".")+1:]))
			}
		}
	}
	return errs
}

// portOf is the numeric port of a host:port listen address, 0 when it has none.
func portOf(listen string) int {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return 0
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return 0
	}
	return p
}
