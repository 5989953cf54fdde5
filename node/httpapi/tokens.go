package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"
)

// tokenEqual compares a presented token with the expected one in constant time
// (over hashes, so the length of the secret does not leak either).
func tokenEqual(presented, expected string) bool {
	if expected == "" {
		return false
	}
	a := sha256.Sum256([]byte(presented))
	b := sha256.Sum256([]byte(expected))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// bearer extracts the token from an Authorization header.
func bearer(h string) string {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// nodeTokens are the node's own tokens: the ingress token, the admin token and the
// read-only token, and during a rotation the previous ones. Compared in constant time; no
// store is read.
type nodeTokens struct {
	ingress, admin, readOnly                         string
	ingressPrevious, adminPrevious, readOnlyPrevious []string
}

// isIngress accepts the ingress token and, during a rotation, the previous ones.
func (t *nodeTokens) isIngress(tok string) bool {
	return tokenEqual(tok, t.ingress) || anyTokenEqual(tok, t.ingressPrevious)
}

// isAdmin accepts the admin token and, during a rotation, the previous ones.
func (t *nodeTokens) isAdmin(tok string) bool {
	return tokenEqual(tok, t.admin) || anyTokenEqual(tok, t.adminPrevious)
}

// isReadOnly accepts the read-only token and, during a rotation, the previous ones.
func (t *nodeTokens) isReadOnly(tok string) bool {
	return tokenEqual(tok, t.readOnly) || anyTokenEqual(tok, t.readOnlyPrevious)
}

func anyTokenEqual(tok string, accepted []string) bool {
	ok := false
	for _, a := range accepted {
		ok = tokenEqual(tok, a) || ok // every one compared: no early exit to time
	}
	return ok
}
