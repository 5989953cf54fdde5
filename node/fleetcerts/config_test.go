package fleetcerts

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node/rfc2136"
)

const testSecret = "c2NhZm8tdGVzdC10c2lnLXNlY3JldC0zMi1ieXRlcyE="

// dns01Config is an enabled acme section with DNS-01 on for the platform domains, its
// secret set in place (as the loader leaves it).
func dns01Config() Config {
	c := Defaults()
	c.Enabled, c.CAServer = true, "https://127.0.0.1:14000/dir"
	c.DNS01.Platform = true
	c.DNS01.RFC2136 = rfc2136.Config{Server: "127.0.0.1:5353", Zones: []string{"example.com"}, KeyName: "scafo-acme", TSIGSecret: testSecret}
	return c
}

// TestConfigACMEDNS01 (the section's own checks; the loader's, the environment and the
// checks with other sections are the dns01 rows of node's
// TestTheNodeConfigurationLoadsOrIsRefusedNamingTheSettingAndItsSource): acme.dns01 is
// checked only when on; Normalize moves the secret out of its file once; Validate
// changes nothing; every refusal names the setting and none carries the secret.
func TestConfigACMEDNS01(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tsig.secret")
	if err := os.WriteFile(file, []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := dns01Config()
	c.DNS01.RFC2136.TSIGSecret, c.DNS01.RFC2136.TSIGSecretFile = "", file
	before := c
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("valid section with the secret in its file: %v", errs)
	}
	if !reflect.DeepEqual(c, before) {
		t.Fatalf("Validate changed the section: %+v, was %+v", c, before)
	}
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	if r := c.DNS01.RFC2136; r.TSIGSecret != testSecret || r.TSIGSecretFile != "" {
		t.Fatalf("after Normalize: secret %q, file %q; want the file's secret, no file", r.TSIGSecret, r.TSIGSecretFile)
	}
	opt, err := c.Options()
	if err != nil {
		t.Fatal(err)
	}
	p, ok := opt.DNS01.Provider.(*rfc2136.Provider)
	if !ok || p.Secret != testSecret || p.Server != "127.0.0.1:5353" || !opt.DNS01.Platform {
		t.Fatalf("DNS-01 options from the section: %+v", opt.DNS01)
	}
	// Off: nothing is checked (no server, no secret), and no provider is built.
	off := dns01Config()
	off.DNS01.Platform, off.DNS01.RFC2136 = false, rfc2136.Config{}
	if errs := off.Validate(); len(errs) != 0 {
		t.Fatalf("dns01 off: %v", errs)
	}
	if err := off.Normalize(); err != nil {
		t.Fatalf("dns01 off: %v", err)
	}
	if opt, err := off.Options(); err != nil || opt.DNS01 != nil {
		t.Fatalf("dns01 off: options %+v, %v", opt.DNS01, err)
	}

	cases := []struct {
		name   string
		change func(*Config)
		sub    string
	}{
		{"no secret", func(c *Config) { c.DNS01.RFC2136.TSIGSecret = "" }, "acme.dns01.rfc2136: no TSIG secret"},
		{"both secrets", func(c *Config) { c.DNS01.RFC2136.TSIGSecretFile = file }, "acme.dns01.rfc2136: tsigSecretFile and tsigSecret both set"},
		{"missing secret file", func(c *Config) {
			c.DNS01.RFC2136.TSIGSecret, c.DNS01.RFC2136.TSIGSecretFile = "", "/nonexistent/tsig"
		}, "acme.dns01.rfc2136.tsigSecretFile"},
		{"secret not base64", func(c *Config) { c.DNS01.RFC2136.TSIGSecret = "!!" + testSecret }, "not base64"},
		{"unknown provider", func(c *Config) { c.DNS01.Provider = "route53" }, "acme.dns01.provider"},
		{"no server", func(c *Config) { c.DNS01.RFC2136.Server = "" }, "acme.dns01.rfc2136: no server"},
		{"bad resolver", func(c *Config) { c.DNS01.Resolvers = []string{"127.0.0.1"} }, "acme.dns01.resolvers[0]"},
		{"propagation timeout", func(c *Config) { c.DNS01.PropagationTimeout = 0 }, "acme.dns01.propagationTimeout"},
		{"propagation timeout too long", func(c *Config) { c.DNS01.PropagationTimeout = ptypes.Duration(31 * time.Minute) }, "acme.dns01.propagationTimeout"},
		{"delegation zone alone turns it on", func(c *Config) {
			c.DNS01.Platform, c.DNS01.DelegationZone, c.DNS01.RFC2136.Server = false, "acme.fleet.example", ""
		}, "no server"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dns01Config()
			tc.change(&c)
			var msgs []string
			for _, err := range c.Validate() {
				msgs = append(msgs, err.Error())
			}
			if _, err := c.Options(); err != nil {
				msgs = append(msgs, err.Error())
			}
			if err := c.Normalize(); err != nil {
				msgs = append(msgs, err.Error())
			}
			all := strings.Join(msgs, "\n")
			if !strings.Contains(all, tc.sub) {
				t.Fatalf("errors %q, want one containing %q", all, tc.sub)
			}
			if strings.Contains(all, testSecret) {
				t.Fatalf("an error carries the secret: %v", all)
			}
		})
	}
}

// TestConfigACMERoots: acme.caRoots unset is the system roots; a missing file or one
// without a PEM certificate is an error naming the setting.
func TestConfigACMERoots(t *testing.T) {
	c := Defaults()
	if opt, err := c.Options(); err != nil || opt.Roots != nil {
		t.Fatalf("no caRoots: roots %v, %v; want the system's (nil)", opt.Roots, err)
	}
	empty := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, sub := range map[string]string{"/nonexistent/roots.pem": "acme.caRoots:", empty: "no PEM certificate"} {
		c.CARoots = file
		if _, err := c.Options(); err == nil || !strings.Contains(err.Error(), sub) {
			t.Fatalf("caRoots %s: err %v, want one containing %q", file, err, sub)
		}
	}
}
