package node

import (
	"fmt"
	"path/filepath"
)

// The ingress, admin and read-only roles never share a token: not the tokens
// themselves, nor one of a role's previous tokens (ingress.previous, admin.previous,
// readonly.previous). An ingress token the admin role accepts lets every ingress, which
// holds it, write as the admin; an admin token the ingress role accepts reads every
// private key of the fleet (/v1/storage); a read-only token another role accepts gives
// a browser, which holds it, that role. Validate refuses an overlap among the configured
// tokens; New refuses any, the token files' included (TestNoTokenIsAcceptedForBothRoles,
// TestAMintedTokenInTheOtherRolesPreviousIsRefused).

// roleToken is one token a role accepts, with the setting that holds it.
type roleToken struct {
	setting string // "admin.token", "ingress.previous[1]"
	from    string // where it came from, when known ("from SCAFO_ADMIN_TOKEN in the environment", "the token file …")
	value   string
}

// roleTokens lists what the role accepts: token (the role's token as it will be used,
// "" when not known yet), from where from says, and tc.Previous, from where prevFrom
// says.
func roleTokens(role string, tc TokenConfig, token, from, prevFrom string) []roleToken {
	var out []roleToken
	if token != "" {
		out = append(out, roleToken{setting: role + ".token", from: from, value: token})
	}
	for i, tok := range tc.Previous {
		out = append(out, roleToken{setting: fmt.Sprintf("%s.previous[%d]", role, i), from: prevFrom, value: tok})
	}
	return out
}

// resolvedRoleTokens lists what the role accepts once its token is known (token: the
// configured one, or its file's): the configured token's source, or its file.
func (c *Config) resolvedRoleTokens(role string, tc TokenConfig, token string) []roleToken {
	from := "the token file " + filepath.Join(c.StateDir, role+"-token")
	if tc.Token != "" {
		from = c.sourceOf(role + ".token")
	}
	return roleTokens(role, tc, token, from, c.sourceOf(role+".previous"))
}

// sourceOf says where the loader read the setting at path ("from <source>"), "" when
// no source set it or c was built in code.
func (c *Config) sourceOf(path string) string {
	if o, ok := c.origins.Of(path); ok {
		return "from " + o.String()
	}
	return ""
}

// ConfigError is a start refused for the node's configuration, found only once the
// token files are read (a token two roles accept): nothing changes until an operator
// fixes it, so the command exits 78 for it, as for a setting the loader refuses, and the
// unit does not restart it (RestartPreventExitStatus=78).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// rolesOverlap returns an error for every token two roles accept, naming the two
// settings (and where each came from, when known). It never shows a token.
func rolesOverlap(ingress, admin, readOnly []roleToken) []error {
	const rotate = "give each role its own tokens (docs/operating.md, Rotating the ingress and admin tokens)"
	var errs []error
	for _, p := range []struct {
		a, b []roleToken
		why  string
	}{
		{admin, ingress, "every ingress holding it could write as the admin, and the admin's users could read every private key (/v1/storage)"},
		{admin, readOnly, "every browser holding the read-only token could write as the admin"},
		{ingress, readOnly, "every browser holding the read-only token could read every private key (/v1/storage), and every ingress could read the audit log"},
	} {
		for _, a := range p.a {
			for _, b := range p.b {
				if a.value == b.value {
					errs = append(errs, fmt.Errorf("%s%s and %s%s hold the same token: %s; %s",
						a.setting, paren(a.from), b.setting, paren(b.from), p.why, rotate))
				}
			}
		}
	}
	return errs
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
