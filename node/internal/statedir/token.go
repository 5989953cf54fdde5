package statedir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/scafo/ingress/internal/settings"
)

// TokenSource says where a token comes from, for the start log line: its file under the
// state dir, or "(configured)" when the configuration gave it (never the token itself).
func TokenSource(given, stateDir, file string) string {
	if given != "" {
		return "(configured)"
	}
	return filepath.Join(stateDir, file)
}

// MinTokenLength is the shortest ingress or admin token a node accepts, configured or
// read from its file.
const MinTokenLength = 16

// LoadOrMintToken returns given when set; otherwise the token stored in
// <stateDir>/<file>, minting 32 random bytes (hex) into it, mode 0600, on first use.
// The token is never logged.
//
// Minting writes a temporary file, syncs it, and links it into place: the token file
// either holds a whole token or does not exist (a full disk never leaves an empty one),
// and two processes starting on one state dir agree on a single token (the link is
// create-only; over an empty file the replacement is a rename, and the state dir's
// lock keeps a second node out). An empty token file, left by an older version on a
// full disk, cannot have been handed to anyone: it is replaced.
//
// The file may be a symlink to the token (a secrets mount), but must name a regular
// file: a symlink to nothing is refused (it took the name, so minting could never
// link into place), and so is anything else (a fifo would block the start), as is a
// token shorter than MinTokenLength or holding a control character (inside it: the
// whitespace around it, a trailing newline included, is trimmed).
func LoadOrMintToken(given, stateDir, file string) (string, error) {
	return loadOrMintToken(given, stateDir, file, true)
}

func loadOrMintToken(given, stateDir, file string, again bool) (string, error) {
	if given != "" {
		return given, nil
	}
	path := filepath.Join(stateDir, file)
	b, err := readTokenFile(path)
	tok := strings.TrimSpace(string(b))
	empty := err == nil && tok == ""
	switch {
	case err == nil && !empty:
		if len(tok) < MinTokenLength {
			return "", fmt.Errorf("token file %s: %d characters, want at least %d (delete it and the node mints one)", path, len(tok), MinTokenLength)
		}
		if i, r := settings.ControlChar(tok); i >= 0 {
			return "", fmt.Errorf("token file %s: a control character (%U) at byte %d: a token cannot hold one (no HTTP header carries it)", path, r, i)
		}
		return tok, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return "", err
	case err != nil:
		if _, lerr := os.Lstat(path); lerr == nil {
			return "", fmt.Errorf("token file %s: a symlink to nothing (remove it, or make it name the token)", path)
		}
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", fmt.Errorf("creating state dir: %w", err)
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("minting token: %w", err)
	}
	tok = hex.EncodeToString(buf)
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
		if !again {
			return "", fmt.Errorf("token file %s: taken while minting, twice", path)
		}
		return loadOrMintToken("", stateDir, file, false) // another process minted first
	}
	if err != nil {
		return "", fmt.Errorf("writing token file: %w", err)
	}
	return tok, nil
}

// maxTokenFile bounds a token file: a larger one is refused, never cut.
const maxTokenFile = 4096

// readTokenFile reads a token file that is (or whose symlink names) a regular file of
// at most maxTokenFile bytes.
func readTokenFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("reading token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("token file %s: a %s, want a regular file", path, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading token file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading token file: %w", err)
	}
	if len(b) > maxTokenFile {
		return nil, fmt.Errorf("token file %s: more than %d bytes, not a token", path, maxTokenFile)
	}
	return b, nil
}
