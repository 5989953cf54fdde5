package node

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// loadOrMintToken returns given when set; otherwise the token stored in
// <stateDir>/<file>, minting 32 random bytes (hex) into it, mode 0600, on first use.
// The token is never logged.
func loadOrMintToken(given, stateDir, file string) (string, error) {
	if given != "" {
		return given, nil
	}
	path := filepath.Join(stateDir, file)
	if b, err := os.ReadFile(path); err == nil {
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("token file %s is empty", path)
		}
		return tok, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("reading token file: %w", err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", fmt.Errorf("creating state dir: %w", err)
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("minting token: %w", err)
	}
	tok := hex.EncodeToString(buf)
	// O_EXCL: two processes starting on one state dir agree on a single token.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return loadOrMintToken("", stateDir, file)
	}
	if err != nil {
		return "", fmt.Errorf("writing token file: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("writing token file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("writing token file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("writing token file: %w", err)
	}
	return tok, nil
}

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
