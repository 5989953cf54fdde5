package scafo

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// The shipped Caddyfile opens no admin API on TCP unless the operator asks for one.
// Caddy's admin API loads any configuration for whoever reaches it, with no credential:
// on a node's machine, where the tenants' instances run, a tenant process on localhost
// could route every host to itself, or load a configuration that answers with
// {env.SCAFO_INGRESS_TOKEN} and take the ingress token (and, through /v1/storage,
// every private key of the fleet).
func TestShippedCaddyfileOpensNoTCPAdminByDefault(t *testing.T) {
	t.Setenv("CADDY_ADMIN", "") // restored after the test
	os.Unsetenv("CADDY_ADMIN")
	t.Setenv("SCAFO_INGRESS_TOKEN", testIngressToken)
	body, err := os.ReadFile("../Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(body, map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatalf("adapting the shipped Caddyfile: %v", err)
	}
	var m struct {
		Admin *struct {
			Disabled bool   `json:"disabled"`
			Listen   string `json:"listen"`
		} `json:"admin"`
	}
	if err := json.Unmarshal(cfg, &m); err != nil {
		t.Fatal(err)
	}
	switch {
	case m.Admin == nil:
		t.Fatal("no admin section: Caddy's default admin listens on localhost:2019")
	case m.Admin.Disabled:
	case strings.HasPrefix(m.Admin.Listen, "unix/"):
	default:
		t.Fatalf("the shipped Caddyfile's admin API listens on %q by default", m.Admin.Listen)
	}
}
