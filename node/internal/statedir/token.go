package statedir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TokenSource says where a token comes from, for the start log line: its file under the
// state dir, or "(configured)" when the configuration gave it (never the token itself).
func TokenSource(given, stateDir, file string) string {
	if given != "" {
		return "(configured)"
	}
	return filepath.Join(stateDir, file)
}

// LoadOrMintToken returns given when set; otherwise the token stored in
// <stateDir>/<file>, minting 32 random bytes (hex) into it, mode 0600, on first use.
// The token is never logged.
//
// Minting writes a temporary file, syncs it, and links it into place: the token file
// either holds a whole token or does not exist (a full disk never leaves an empty one),
// and two processes starting on one state dir agree on a single token (the link is
// create-only). An empty token file, left by an older version on a full disk, cannot
// have been handed to anyone: it is replaced.
func LoadOrMintToken(given, stateDir, file string) (string, error) {
	if given != "" {
		return given, nil
	}
	path := filepath.Join(stateDir, file)
	b, err := os.ReadFile(path)
	empty := err == nil && strings.TrimSpace(string(b)) == ""
	switch {
	case err == nil && !empty:
		return strings.TrimSpace(string(b)), nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
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
	tmp, err := os.CreateTemp(stateDir, "."+file+"-*")
	if err != nil {
		return "", fmt.Errorf("writing token file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(tok + "\n")
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o600)
	}
	if werr != nil {
		return "", fmt.Errorf("writing token file: %w", werr)
	}
	if empty {
		err = os.Rename(tmp.Name(), path)
	} else {
		err = os.Link(tmp.Name(), path)
	}
	if errors.Is(err, fs.ErrExist) {
		return LoadOrMintToken("", stateDir, file) // another process minted first
	}
	if err != nil {
		return "", fmt.Errorf("writing token file: %w", err)
	}
	return tok, nil
}
