package node_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigACMEDNS01Loaded: through the loader, the TSIG secret is read from its file
// or SCAFO_ACME_DNS01_RFC2136_TSIGSECRET, acme.dns01 is checked only when on, and the
// checks with other sections refuse naming both settings, never carrying the secret.
// The section's own refusals are fleetcerts's TestConfigACMEDNS01.
func TestConfigACMEDNS01Loaded(t *testing.T) {
	const secret = "c2NhZm8tdGVzdC10c2lnLXNlY3JldC0zMi1ieXRlcyE="
	file := filepath.Join(t.TempDir(), "tsig.secret")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--acme.enabled", "--acme.caServer=https://127.0.0.1:14000/dir", "--platform.domains=apps.example.com"}
	rfc := []string{"--acme.dns01.rfc2136.server=127.0.0.1:5353", "--acme.dns01.rfc2136.zones=example.com", "--acme.dns01.rfc2136.keyName=scafo-acme"}
	args := func(extra ...string) []string { return append(append(append([]string{}, base...), rfc...), extra...) }
	envSecret := []string{"SCAFO_ACME_DNS01_RFC2136_TSIGSECRET=" + secret}

	cfg, err := loadConfig(t, args("--acme.dns01.platform", "--acme.dns01.rfc2136.tsigSecretFile="+file), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.ACME.DNS01.RFC2136; r.TSIGSecret != secret || r.TSIGSecretFile != "" {
		t.Fatalf("secret from the file: the loader left secret %q, file %q", r.TSIGSecret, r.TSIGSecretFile)
	}
	p, err := cfg.ACME.DNS01.RFC2136.Provider()
	if err != nil || p.Secret != secret || p.Server != "127.0.0.1:5353" {
		t.Fatalf("provider from the file: %v %v", p, err)
	}
	cfg, err = loadConfig(t, args("--acme.dns01.delegationZone=acme.fleet.example"), envSecret)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := cfg.ACME.DNS01.RFC2136.Provider(); err != nil || p.Secret != secret {
		t.Fatalf("provider from the environment: %v %v", p, err)
	}
	// Off: nothing is checked (no server, no secret).
	if _, err := loadConfig(t, base, nil); err != nil {
		t.Fatalf("dns01 off: %v", err)
	}
	cases := []struct {
		name    string
		args    []string
		environ []string
		sub     string
	}{
		{"no secret", args("--acme.dns01.platform"), nil, "no TSIG secret"},
		{"both secrets", args("--acme.dns01.platform", "--acme.dns01.rfc2136.tsigSecretFile="+file), envSecret, "both set"},
		{"missing secret file", args("--acme.dns01.platform", "--acme.dns01.rfc2136.tsigSecretFile=/nonexistent/tsig"), nil, "tsigSecretFile"},
		{"secret not base64", args("--acme.dns01.platform"), []string{"SCAFO_ACME_DNS01_RFC2136_TSIGSECRET=!!" + secret}, "not base64"},
		{"with the old flag", args("--acme.dns01.platform", "--traefik.platformWildcardCerts", "--traefik.certResolver=le"), envSecret, "traefik.platformWildcardCerts"},
		{"without the api apex", args("--acme.dns01.platform", "--api.public=false"), envSecret, "needs api.public"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadConfig(t, c.args, c.environ)
			if err == nil || !strings.Contains(err.Error(), c.sub) {
				t.Fatalf("err %v, want one containing %q", err, c.sub)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error carries the secret: %v", err)
			}
		})
	}
}
