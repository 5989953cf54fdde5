package httpapi

import (
	"strings"
	"testing"

	"github.com/scafo/ingress/node/internal/statedir"
)

// TestTokenConfigValidate: a configured token and each previous one hold at least
// statedir.MinTokenLength characters, refused naming the setting (an empty previous
// entry would be a token nobody holds); no token (the node mints one) passes. The root
// checks each role's section (node's
// TestTheNodeConfigurationLoadsOrIsRefusedNamingTheSettingAndItsSource: "a short admin token").
func TestTokenConfigValidate(t *testing.T) {
	long := strings.Repeat("t", statedir.MinTokenLength)
	for _, c := range []struct {
		tc  TokenConfig
		err string // "" valid
	}{
		{TokenConfig{}, ""},
		{TokenConfig{Token: long, Previous: []string{long}}, ""},
		{TokenConfig{Token: "short-token"}, "ingress.token: a token of at least"},
		{TokenConfig{Previous: []string{long, ""}}, "ingress.previous[1]: a token of at least"},
	} {
		errs := c.tc.Validate("ingress")
		switch {
		case c.err == "" && len(errs) != 0:
			t.Errorf("%+v: %v, want valid", c.tc, errs)
		case c.err != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), c.err)):
			t.Errorf("%+v: %v, want one error with %q", c.tc, errs, c.err)
		}
	}
}

// TestAPIConfigValidate: api.allowedHosts takes DNS names (one label or more, any case,
// a trailing dot), and refuses, naming the entry, what is no name: a URL, a port, an IP
// literal (always answered), a wildcard, an empty entry.
func TestAPIConfigValidate(t *testing.T) {
	for _, c := range []struct {
		hosts []string
		err   string // "" valid
	}{
		{nil, ""},
		{[]string{"node-1.internal.example.net", "Scafo-Node.", "nodebox"}, ""},
		{[]string{"ok.example", "http://node-1.example"}, "api.allowedHosts[1]"},
		{[]string{"node-1.example:7400"}, "no scheme, port"},
		{[]string{"10.83.0.1"}, "always answered"},
		{[]string{"[::1]"}, "api.allowedHosts[0]"},
		{[]string{"*.example.net"}, "api.allowedHosts[0]"},
		{[]string{""}, "api.allowedHosts[0]"},
		{[]string{"bad_name.example"}, "api.allowedHosts[0]"},
	} {
		errs := APIConfig{AllowedHosts: c.hosts}.Validate()
		switch {
		case c.err == "" && len(errs) != 0:
			t.Errorf("%q: %v, want valid", c.hosts, errs)
		case c.err != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), c.err)):
			t.Errorf("%q: %v, want one error with %q", c.hosts, errs, c.err)
		}
	}
}

// TestTheHostGuardAnswersOnlyNamesTheNodeGoesBy: hostGuard.allows over the spellings of
// a Host header (TestARebindingHostIsRefused holds the same through the API in process).
func TestTheHostGuardAnswersOnlyNamesTheNodeGoesBy(t *testing.T) {
	g := newHostGuard([]string{"apps.example.com", "Node-1.Internal.example.net", ""}, func(string) bool { return false }, nil)
	for host, want := range map[string]bool{
		"": true, "127.0.0.1": true, "127.0.0.1:7400": true, "10.83.0.1:80": true, "[::1]": true, "[::1]:7400": true,
		"[fe80::1%25eth0]:7400": true, "localhost": true, "LocalHost.:7400": true, "apps.example.com": true,
		"APPS.example.com.:443": true, "node-1.internal.example.net": true,
		"evil.example": false, "evil.example:7400": false, "localhost.evil.example": false, "127.0.0.1.evil.example": false,
		"x.apps.example.com": false, "example.com": false, "internal.example.net": false, "[evil.example]": false,
		"127.0.0.1:7400:1": false, "localhost..": false, ":7400": false, ".": false,
	} {
		if got := g.allows(host); got != want {
			t.Errorf("allows(%q) = %v, want %v", host, got, want)
		}
	}
}
