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
