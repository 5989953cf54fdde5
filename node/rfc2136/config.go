package rfc2136

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Config is the provider's settings (the node's acme.dns01.rfc2136.* settings). The
// secret comes from a file or SCAFO_ACME_DNS01_RFC2136_TSIGSECRET; it is never logged
// nor shown in the status. Errors name the field under "rfc2136"; the node's section
// prefixes its path (acme.dns01.).
type Config struct {
	Server         string   `description:"Primary DNS server taking the updates (host:port; port 53 by default)." json:"server,omitempty"`
	Zones          []string `description:"Zones the key may edit (the platform domains' zones and the delegation zone)." json:"zones,omitempty"`
	KeyName        string   `description:"TSIG key name." json:"keyName,omitempty"`
	KeyAlgorithm   string   `description:"TSIG algorithm (hmac-sha256, hmac-sha384, hmac-sha512, hmac-sha224, hmac-sha1)." json:"keyAlgorithm,omitempty"`
	TSIGSecretFile string   `description:"File holding the TSIG secret (base64), e.g. the secret line of a tsig-keygen key." json:"tsigSecretFile,omitempty"`
	TSIGSecret     string   `description:"The TSIG secret (base64): set it through SCAFO_ACME_DNS01_RFC2136_TSIGSECRET or tsigSecretFile, not as a flag (a flag shows in the process list)." json:"tsigSecret,omitempty" loggable:"false"`
}

// ReadSecret moves the secret of TSIGSecretFile into TSIGSecret (the loader's
// normalisation): the file is read once, and from then on the secret has one place
// whatever its source.
func (c *Config) ReadSecret() error {
	switch {
	case c.TSIGSecretFile != "" && c.TSIGSecret != "":
		return errors.New("rfc2136: tsigSecretFile and tsigSecret both set: one of them")
	case c.TSIGSecretFile != "":
		b, err := os.ReadFile(c.TSIGSecretFile)
		if err != nil {
			return fmt.Errorf("rfc2136.tsigSecretFile: %w", err)
		}
		c.TSIGSecret, c.TSIGSecretFile = strings.TrimSpace(string(b)), ""
	}
	return nil
}

// Provider builds the provider the settings describe and validates it (never putting
// the secret in an error). A secret still in its file (settings not normalised by
// ReadSecret) is read; c is not changed.
func (c Config) Provider() (*Provider, error) {
	if err := c.ReadSecret(); err != nil {
		return nil, err
	}
	p := &Provider{Server: c.Server, Zones: c.Zones, KeyName: c.KeyName, KeyAlgorithm: c.KeyAlgorithm, Secret: c.TSIGSecret}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}
