package node_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigACMEDNS01: acme.dns01 is checked only when on (platform or a delegation
// zone); the secret is read from a file or SCAFO_ACME_DNS01_RFC2136_TSIGSECRET; every
// refusal names the setting and none carries the secret.
func TestConfigACMEDNS01(t *testing.T) {
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
	p, err := cfg.ACME.DNS01.RFC2136Provider()
	if err != nil || p.Secret != secret || p.Server != "127.0.0.1:5353" {
		t.Fatalf("provider from the file: %v %v", p, err)
	}
	cfg, err = loadConfig(t, args("--acme.dns01.delegationZone=acme.fleet.example"), envSecret)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := cfg.ACME.DNS01.RFC2136Provider(); err != nil || p.Secret != secret {
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
		{"unknown provider", args("--acme.dns01.platform", "--acme.dns01.provider=route53"), envSecret, "acme.dns01.provider"},
		{"no server", append(append([]string{}, base...), "--acme.dns01.platform", "--acme.dns01.rfc2136.zones=example.com", "--acme.dns01.rfc2136.keyName=k"), envSecret, "no server"},
		{"bad resolver", args("--acme.dns01.platform", "--acme.dns01.resolvers=127.0.0.1"), envSecret, "acme.dns01.resolvers[0]"},
		{"propagation timeout", args("--acme.dns01.platform", "--acme.dns01.propagationTimeout=0s"), envSecret, "propagationTimeout"},
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
